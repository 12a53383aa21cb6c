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

package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// kubeControllers are the kube-controller-manager controllers the test world
// runs: garbage collection and namespace deletion (so that nothing owned
// outlives its owner), service accounts (pods need the default one), the
// volume binder and claim protection (CDI's claims bind as on a real
// cluster), ReplicaSets and Deployments (so plain workloads behave), the
// disruption controller (PodDisruptionBudgets answer evictions), and
// CronJobs, Jobs and their clean-up (a DataImportCron polls its registry
// from a CronJob), and resource quotas (the API server's quota admission
// enforces a ResourceQuota only once this controller has computed its
// usage, docs/operations.md#quota).
// The node lifecycle controller is left out: simulated nodes have no kubelet
// heartbeat and would be tainted unreachable.
var kubeControllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
	"replicaset-controller",
	"deployment-controller",
	"disruption-controller",
	"cronjob-controller",
	"job-controller",
	"ttl-after-finished-controller",
	"resourcequota-controller",
}

// process is a control-plane binary started by the environment. Like a
// pod's container under a kubelet, it is started again when it exits
// before the environment stops it: a controller that loses its lease
// while the machine stalls exits, as upstream's do, and comes back.
type process struct {
	name, bin, binary string
	args, env         []string
	log               *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd exits
	stopped bool
	stopCh  chan struct{} // closed by stop, ends a pending restart
	backoff *flowcontrol.Backoff
	exits   []string
}

// StartKubeComponents starts the real kube-scheduler and
// kube-controller-manager against the environment's API server. They log
// to files in a temporary directory (kept when TESTENV_VERBOSE is set) and
// die with the test process.
func (e *Env) StartKubeComponents() error {
	bin := BinDir()
	if err := checkBinaries(bin, "kube-scheduler", "kube-controller-manager"); err != nil {
		return err
	}
	kubeconfigPath, err := e.componentsKubeconfig()
	if err != nil {
		return err
	}
	common := []string{"--kubeconfig=" + kubeconfigPath, "--leader-elect=false", "--secure-port=0", "--v=1"}
	if err := e.startProcess(bin, "kube-scheduler", "kube-scheduler", common); err != nil {
		return err
	}
	return e.startProcess(bin, "kube-controller-manager", "kube-controller-manager", append(common,
		"--controllers="+strings.Join(kubeControllers, ","),
		"--concurrent-gc-syncs=10",
		"--use-service-account-credentials=false",
	))
}

// componentsKubeconfig writes, once, the kubeconfig of the components the
// environment runs as processes: a cluster administrator.
func (e *Env) componentsKubeconfig() (string, error) {
	if e.componentsDir != "" {
		return filepath.Join(e.componentsDir, "kubeconfig"), nil
	}
	user, err := e.ControlPlane.AddUser(envtest.User{Name: "kube-components", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("creating a user for the components: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "capkv-kube-components-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	e.componentsDir = dir
	return path, nil
}

// startProcess runs bin/binary with args as the component name, logging to
// name.log in the components' directory.
func (e *Env) startProcess(bin, binary, name string, args []string) error {
	return e.startProcessEnv(bin, binary, name, args, nil)
}

// startProcessEnv is startProcess with extra environment variables.
func (e *Env) startProcessEnv(bin, binary, name string, args, env []string) error {
	log, err := os.Create(filepath.Join(e.componentsDir, name+".log")) //nolint:gosec // a temporary directory of our own
	if err != nil {
		return err
	}
	p := &process{name: name, bin: bin, binary: binary, args: args, env: env, log: log, stopCh: make(chan struct{}),
		backoff: flowcontrol.NewBackOff(restartBackoff, maxRestartBackoff)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.start(); err != nil {
		_ = log.Close()
		return err
	}
	e.processes = append(e.processes, p)
	return nil
}

// The kubelet's back-off for a container that keeps exiting, with the
// kubelet's own mechanism (client-go's flowcontrol.Backoff): 10 s at first,
// doubling with each exit to at most 5 minutes, and back to 10 s after 10
// minutes without an exit (pkg/kubelet/kubelet.go's backOffPeriod and
// MaxContainerBackOff). restartBackoff is a variable for tests.
var restartBackoff = 10 * time.Second

const maxRestartBackoff = 5 * time.Minute

// start runs the process's command; p.mu is held. When the command exits
// before stop, it is started again after the back-off.
func (p *process) start() error {
	cmd := exec.Command(filepath.Join(p.bin, p.binary), p.args...) //nolint:gosec // binaries built by this repository
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	// The kernel kills the component if the test process dies first, so no
	// process outlives a crashed or interrupted test run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		close(exited)
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.stopped {
			p.restartLater(fmt.Sprintf("%s exited at %s (%v)", p.name, time.Now().Format(time.TimeOnly), err))
		}
	}()
	return nil
}

// restartLater records why the process is down and starts it again after
// the back-off, unless it is stopped first; p.mu is held.
func (p *process) restartLater(why string) {
	p.backoff.Next(p.name, time.Now())
	backoff := p.backoff.Get(p.name)
	p.exits = append(p.exits, why)
	fmt.Fprintf(p.log, "testenv: %s; starting it again in %v\n", why, backoff)
	go func() {
		select {
		case <-p.stopCh:
			return
		case <-time.After(backoff):
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.stopped {
			return
		}
		if err := p.start(); err != nil {
			p.restartLater(err.Error())
		}
	}()
}

// ComponentExits lists the components that exited while the environment
// ran (and were started again), each with when and why: a failed test's
// report names them, since a controller gone for a while explains waits
// that timed out.
func (e *Env) ComponentExits() []string {
	var exits []string
	for _, p := range e.processes {
		p.mu.Lock()
		exits = append(exits, p.exits...)
		p.mu.Unlock()
	}
	return exits
}

// stopProcesses stops the components the environment started, the last
// started first: virt-controller goes before the virt-api whose webhooks it
// calls.
func (e *Env) stopProcesses() error {
	var errs []error
	for _, p := range slices.Backward(e.processes) {
		errs = append(errs, p.stop())
	}
	e.processes = nil
	if e.componentsDir != "" && os.Getenv("TESTENV_VERBOSE") == "" {
		_ = os.RemoveAll(e.componentsDir)
	}
	return errors.Join(errs...)
}

// stop ends the process with SIGTERM, or SIGKILL after 10 s, and keeps
// it from being started again.
func (p *process) stop() error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	close(p.stopCh)
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("%s did not stop within 10s and was killed", p.name)
	}
	_ = p.log.Close()
	return err
}

// StopComponent stops the component name (virt-api, cdi-apiserver, …) as
// an outage would, and returns the function that starts it again with the
// same command line, logging to name-restarted.log.
func (e *Env) StopComponent(name string) (restart func() error, err error) {
	i := slices.IndexFunc(e.processes, func(p *process) bool { return p.name == name && !p.isStopped() })
	if i < 0 {
		return nil, fmt.Errorf("no running component %s", name)
	}
	p := e.processes[i]
	if err := p.stop(); err != nil {
		return nil, err
	}
	return func() error {
		return e.startProcessEnv(p.bin, p.binary, name+"-restarted", p.args, p.env)
	}, nil
}

// isStopped tells whether stop ended the process.
func (p *process) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// WriteKubeconfig writes a kubeconfig of the environment's API server to
// path, authenticating as userName, a cluster administrator, so that its
// requests can be told apart in the audit log.
func (e *Env) WriteKubeconfig(path, userName string) error {
	user, err := e.ControlPlane.AddUser(envtest.User{Name: userName, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
