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

// Package main builds a single cert-manager binary for CAPKV's tests.
//
// Upstream ships cmd/controller and cmd/cainjector as separate Go modules
// that the module proxy cannot serve (they use a relative replace), so the
// tests could not pin and build the real cert-manager from the proxy. The
// library module github.com/cert-manager/cert-manager can be fetched, and it
// holds every controller; this thin main wires the pieces we need (the
// Certificate machinery with SelfSigned and CA issuers, and the CA
// injector) the same way upstream's commands do, as local processes that
// talk to a kube-apiserver through a kubeconfig.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/spf13/cobra"
	logsapi "k8s.io/component-base/logs/api/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// main runs the selected subcommand until it fails or a signal asks it to
// stop. Errors exit non-zero so a test harness notices a crashed
// component; a clean stop after SIGTERM or SIGINT exits zero.
func main() {
	ctx, stop := signalContext()
	defer stop()

	setVersion()
	logf.InitLogs()
	// controller-runtime (used by the CA injector) logs through its own
	// global logger; point it at cert-manager's klog-backed one so both
	// subcommands write the same format to stderr.
	ctrl.SetLogger(logf.Log)

	err := newRootCommand(ctx).ExecuteContext(ctx)
	logf.FlushLogs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager: %v\n", err)
		os.Exit(1)
	}
}

// setVersion reports the pinned cert-manager module version in logs and
// User-Agent headers. Upstream stamps it with -ldflags at release time;
// here the module's own version from the build info is the truth.
func setVersion() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for _, dep := range info.Deps {
		if dep.Path == "github.com/cert-manager/cert-manager" {
			util.AppVersion = dep.Version
		}
	}
}

// signalContext returns a context cancelled by the first SIGTERM or SIGINT,
// so the components shut their control loops and informers down cleanly.
// After that first signal the default handling is restored, so a second
// signal kills a process whose shutdown hangs instead of being ignored.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// newRootCommand builds the `cert-manager` command with its two
// subcommands. Logging flags (-v, --vmodule, --logging-format) live on the
// root so both subcommands share them and they are applied exactly once,
// which component-base requires.
func newRootCommand(ctx context.Context) *cobra.Command {
	logging := logsapi.NewLoggingConfiguration()
	root := &cobra.Command{
		Use:   "cert-manager",
		Short: "cert-manager controller and CA injector built for CAPKV tests",
		Long: "A single binary running upstream cert-manager's controller and CA injector\n" +
			"(github.com/cert-manager/cert-manager library packages) as local processes.\n" +
			"The webhook component is not included.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if err := logf.ValidateAndApply(logging); err != nil {
				return fmt.Errorf("invalid logging flags: %w", err)
			}
			return nil
		},
	}
	logf.AddFlagsNonDeprecated(logging, root.PersistentFlags())
	root.AddCommand(newControllerCommand(ctx), newCAInjectorCommand(ctx))
	return root
}
