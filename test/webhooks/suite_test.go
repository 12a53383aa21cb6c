/*
Copyright 2026 The CAPKV Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package webhooks_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	// The real virt-api judges the same VM specs as the provider's webhook
	// (TestAdmissionAgreesWithVirtAPI).
	if err := env.StartKubeVirt(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wh := env.WebhookInstallOptions
	mgr, err := testenv.StartManager(env.Config, manager.Options{
		EnableWebhooks: true, WebhookHost: wh.LocalServingHost, WebhookPort: wh.LocalServingPort,
		WebhookCertDir: wh.LocalServingCertDir, HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mgr.WaitServing(testenv.WebhookAddress(&wh)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := mgr.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

func zapLevel() zapcore.Level {
	if os.Getenv("TESTENV_VERBOSE") != "" {
		return zapcore.Level(-5)
	}
	return zapcore.ErrorLevel
}
