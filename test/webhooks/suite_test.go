package webhooks_test

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// env is a real kube-apiserver with CAPKV's webhook configurations installed,
// served by a manager built exactly as main.go builds it.
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || flag.Lookup("test.fuzz").Value.String() != "" {
		// Fuzzing and -short runs need no API server.
		os.Exit(m.Run())
	}
	os.Exit(runWithEnv(m))
}

func runWithEnv(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	var err error
	env, err = testenv.Start(testenv.Options{WithCAPKVWebhooks: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wh := env.WebhookInstallOptions
	mgr, err := manager.New(ctx, env.Config, manager.Options{
		EnableWebhooks: true, WebhookHost: wh.LocalServingHost, WebhookPort: wh.LocalServingPort,
		WebhookCertDir: wh.LocalServingCertDir, HealthProbeBindAddress: "0",
		Metrics: metricsserver.Options{BindAddress: "0"}, SyncPeriod: 10 * time.Minute,
		KubevirtClusterConcurrency: 1, KubevirtMachineConcurrency: 1, KubevirtMachineTemplateConcurrency: 1,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if err := waitForTLS(net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)), done); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// waitForTLS waits until the webhook server accepts TLS connections, or the
// manager fails.
func waitForTLS(addr string, failed <-chan error) error {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			select {
			case err := <-failed:
				return false, fmt.Errorf("manager stopped before serving webhooks: %w", err)
			default:
			}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return false, nil
			}
			return true, conn.Close()
		})
	if err != nil {
		return fmt.Errorf("waiting for the webhook server at %s: %w", addr, err)
	}
	return nil
}

func zapLevel() zapcore.Level {
	if os.Getenv("TESTENV_VERBOSE") != "" {
		return zapcore.Level(-5)
	}
	return zapcore.ErrorLevel
}
