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

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// providerProcess is the measured provider's manager, run as its own
// process so that its CPU time and memory are its own.
type providerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// startProvider runs command through sh, with KUBECONFIG pointing at the
// measured user's kubeconfig and output to logPath.
func startProvider(command, kubeconfig, logPath string) (*providerProcess, error) {
	logFile, err := os.Create(logPath) //nolint:gosec // the benchmark's own output file
	if err != nil {
		return nil, err
	}
	// exec keeps the provider itself as the measured process, not a shell.
	cmd := exec.Command("sh", "-c", "exec "+command) //nolint:gosec // the user's own command line
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the provider (make build?): %w", err)
	}
	p := &providerProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		p.mu.Lock()
		p.err = fmt.Errorf("the provider exited, see %s: %w", logPath, err)
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *providerProcess) pid() int { return p.cmd.Process.Pid }

// exited returns an error once the provider has exited. A nil process,
// the floor's, never exits.
func (p *providerProcess) exited() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// usage reads the provider's CPU seconds and peak memory while it runs.
func (p *providerProcess) usage() (cpuSeconds, peakMiB float64, err error) {
	if err := p.exited(); err != nil {
		return 0, 0, err
	}
	cpu, peak, err := processUsage(p.pid())
	return cpu, float64(peak) / (1 << 20), err
}

func (p *providerProcess) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// installCRDs installs the CustomResourceDefinitions found in a YAML file
// or directory and waits until they are served.
func installCRDs(cfg *rest.Config, path string) (int, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{abs}, ErrorIfPathMissing: true, MaxTime: testenv.CRDWait})
	return len(crds), err
}
