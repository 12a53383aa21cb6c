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

package controllers_test

import (
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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

// startManager starts a manager on the shared environment.
func startManager(t *testing.T, o manager.Options) *testenv.Manager {
	t.Helper()
	return startManagerOn(t, env, o)
}

// startManagerOn starts a manager against e with o (webhooks and metrics
// off, 2 workers per controller) and stops it when the test ends.
func startManagerOn(t *testing.T, e *testenv.Env, o manager.Options) *testenv.Manager {
	t.Helper()
	return startManagerAs(t, e.Config, o)
}

// startManagerAs starts a manager that authenticates with cfg.
func startManagerAs(t *testing.T, cfg *rest.Config, o manager.Options) *testenv.Manager {
	t.Helper()
	m, err := testenv.StartManager(cfg, o)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	})
	return m
}
