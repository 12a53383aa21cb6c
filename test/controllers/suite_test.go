package controllers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// env is a real API server with every CRD, shared by the tests that do not
// change which CRDs are installed.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// runningManager is a manager built as main.go builds it, started in the
// background.
type runningManager struct {
	healthAddr string
	stopped    chan error
}

// startManager starts a manager on the shared environment.
func startManager(t *testing.T, o manager.Options) *runningManager {
	t.Helper()
	return startManagerOn(t, env, o)
}

// startManagerOn starts a manager against e with o (health probes on a free
// port, webhooks and metrics off) and stops it when the test ends.
func startManagerOn(t *testing.T, e *testenv.Env, o manager.Options) *runningManager {
	t.Helper()
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())

	o.HealthProbeBindAddress = addr
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.SkipNameValidation = true
	if o.SyncPeriod == 0 {
		o.SyncPeriod = 10 * time.Minute
	}
	for _, c := range []*int{&o.KubevirtClusterConcurrency, &o.KubevirtMachineConcurrency, &o.KubevirtMachineTemplateConcurrency} {
		if *c == 0 {
			*c = 2
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, e.Config, o)
	g.Expect(err).NotTo(HaveOccurred())
	rm := &runningManager{healthAddr: addr, stopped: make(chan error, 1)}
	go func() { rm.stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-rm.stopped; err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	})
	return rm
}

// healthy reports whether /healthz and /readyz answer 200 and the manager
// has not exited.
func (rm *runningManager) healthy() error {
	select {
	case err := <-rm.stopped:
		rm.stopped <- err
		return fmt.Errorf("manager exited: %w", err)
	default:
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + rm.healthAddr + path)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", path, resp.StatusCode)
		}
	}
	return nil
}
