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

package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// secretMountFlags map the paths where the provider's Deployment mounts
// Secrets to the manager flag that names the directory: a process on the
// host cannot see the pod's mount, so the runner writes the Secret into the
// pod's directory and points the flag there. A mount path not listed fails
// the pod, so that a manifest change cannot slip past the runner.
var secretMountFlags = map[string]string{
	"/tmp/k8s-webhook-server/serving-certs": "--webhook-cert-dir",
}

// launch is how a pod's container is started.
type launch struct {
	path string
	args []string
	env  []string
	dir  string
	// user is who the process runs as; nil: the runner's user.
	user *syscall.Credential
}

// serviceAccountMount is where a pod's ServiceAccount token is mounted.
const serviceAccountMount = "/var/run/secrets/kubernetes.io/serviceaccount"

// prepare turns the pod's container into a process launch: the binary for
// the container's command, its arguments with the pod's own listen
// addresses, its environment, its Secret volumes written to disk and a
// kubeconfig that impersonates its ServiceAccount. A nil launch means a
// mounted Secret does not exist yet.
func (r *PodRunner) prepare(ctx context.Context, pod *corev1.Pod, ctr *container) (*launch, error) {
	if len(pod.Spec.Containers) != 1 {
		return nil, fmt.Errorf("pod %s has %d containers; the world runs the provider's single manager container", pod.Name, len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if err := os.MkdirAll(ctr.dir, 0o700); err != nil {
		return nil, err
	}
	l, err := r.process(pod, &c, ctr.dir)
	if err != nil {
		return nil, err
	}
	for i, a := range l.args {
		l.args[i] = onPodIP(a, ctr.ip)
	}
	if !hasFlag(c.Args, "--health-addr") {
		l.args = append(l.args, fmt.Sprintf("--health-addr=%s:9440", ctr.ip))
	}
	l.args = append(l.args, "--webhook-host="+ctr.ip)
	for _, m := range c.VolumeMounts {
		flag, ok := secretMountFlags[strings.TrimSuffix(m.MountPath, "/")]
		vol := volumeNamed(pod, m.Name)
		if vol != nil && vol.Projected != nil && strings.TrimSuffix(m.MountPath, "/") == serviceAccountMount {
			// The API server's ServiceAccount admission mounts the
			// token; the kubeconfig below stands for it.
			continue
		}
		if vol == nil || vol.Secret == nil || !ok {
			return nil, fmt.Errorf("pod %s mounts %s at %s; the world maps only Secret volumes at %v", pod.Name, m.Name, m.MountPath, secretMountFlags)
		}
		dir := filepath.Join(ctr.dir, "volumes", m.Name)
		found, err := r.writeSecret(ctx, pod.Namespace, vol.Secret.SecretName, dir)
		if err != nil || !found {
			return nil, err
		}
		l.args = append(l.args, flag+"="+dir)
	}
	kubeconfig, err := r.kubeconfig(pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(ctr.dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	l.args = append(l.args, "--kubeconfig="+path)
	if r.guestProxy != "" {
		l.env = append(l.env, "ALL_PROXY=socks5://"+r.guestProxy)
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			l.env = append(l.env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			l.env = append(l.env, e.Name+"="+pod.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			l.env = append(l.env, e.Name+"="+pod.Name)
		default:
			return nil, fmt.Errorf("pod %s sets %s from a source the world does not resolve", pod.Name, e.Name)
		}
	}
	if l.user != nil {
		if err := giveTo(ctr.dir, r.dir, l.user.Uid, l.user.Gid); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// process is how the container starts: from its image in the runner's
// image layout, as the image and the pod spec say; a release's image
// mapped to a binary of its own (an upgrade) or, for an image by tag that
// no layout holds (make release-manifests without make image), bin/manager
// as /manager. An image by digest runs only from the layout: the release
// pins what was built.
func (r *PodRunner) process(pod *corev1.Pod, c *corev1.Container, dir string) (*launch, error) {
	binary, found := r.images[c.Image]
	if !found {
		img, err := r.store.resolve(c.Image)
		switch {
		case err == nil:
			path, args, env, err := containerProcess(img, c)
			if err != nil {
				return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			uid, gid, err := runAs(pod, c, img)
			if err != nil {
				return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			l := &launch{path: path, args: args, env: env, dir: dir}
			if os.Geteuid() == 0 {
				// Only root can start a process as another user; a runner
				// of another user runs the image as itself.
				l.user = &syscall.Credential{Uid: uid, Gid: gid}
			}
			return l, nil
		case !errors.Is(err, errNoImage) || strings.Contains(c.Image, "@"):
			return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
		}
		binary = r.binary
	}
	if len(c.Command) != 1 || c.Command[0] != "/manager" {
		return nil, fmt.Errorf("pod %s runs %q; the world runs /manager as %s", pod.Name, c.Command, binary)
	}
	return &launch{path: binary, args: append([]string{}, c.Args...), dir: dir}, nil
}

// onPodIP binds a flag's all-interfaces address (--x=:8443) to the pod IP:
// pods here share the host's network.
func onPodIP(arg, ip string) string {
	name, value, ok := strings.Cut(arg, "=")
	if ok && strings.HasPrefix(value, ":") {
		return name + "=" + ip + value
	}
	return arg
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func volumeNamed(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// writeSecret writes each key of a Secret to a file of dir, as the
// kubelet's Secret volume does; found is false while it does not exist.
func (r *PodRunner) writeSecret(ctx context.Context, namespace, name, dir string) (bool, error) {
	s := &corev1.Secret{}
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return false, err
		}
	}
	return true, nil
}

// containerPort resolves a probe's or Service's target port, by number or
// by the container port's name.
func containerPort(c *corev1.Container, port intstr.IntOrString) (int32, bool) {
	if port.Type == intstr.Int {
		return port.IntVal, port.IntVal != 0
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// process is a running container.
type process struct {
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
	// exitErr is how the process ended (nil: exit code 0); set before
	// exited closes.
	exitErr error
}

// startProcess starts the launch; onExit runs when the process ends.
func startProcess(l *launch, onExit func()) (*process, error) {
	log, err := os.OpenFile(filepath.Join(l.dir, "container.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(l.path, l.args...) //nolint:gosec // the provider binary this repository builds
	cmd.Dir, cmd.Env = l.dir, l.env
	cmd.Stdout, cmd.Stderr = log, log
	// The kernel kills the container if the test process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: l.user}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", l.path, err)
	}
	p := &process{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		// The kubelet keeps a container's last termination state; here it
		// is the log's last line, so a container killed by a signal, which
		// writes nothing itself, still shows how it ended.
		p.exitErr = cmd.Wait()
		_, _ = fmt.Fprintf(log, "world: container %s\n", exitState(cmd.Process.Pid, p.exitErr))
		close(p.exited)
		onExit()
	}()
	return p, nil
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// state says whether the process runs or how it ended.
func (p *process) state() string {
	if !p.done() {
		return fmt.Sprintf("running (pid %d)", p.cmd.Process.Pid)
	}
	return exitState(p.cmd.Process.Pid, p.exitErr)
}

// exitState is how a process ended, from what Wait returned.
func exitState(pid int, err error) string {
	if err == nil {
		return fmt.Sprintf("exited (pid %d): exit status 0", pid)
	}
	return fmt.Sprintf("exited (pid %d): %v", pid, err)
}

// stop sends SIGTERM and kills the process after grace.
func (p *process) stop(grace time.Duration) error {
	defer p.log.Close()
	if p.done() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s and was killed", p.cmd.Path, grace)
	}
}

// podIPs hands out loopback pod IPs from a /17.
type podIPs struct {
	mu    sync.Mutex
	base  net.IP
	inUse map[types.UID]string
}

func newPodIPs(cidr string) (*podIPs, error) {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() == nil {
		return nil, errors.Join(err, fmt.Errorf("pod range %q is not an IPv4 CIDR", cidr))
	}
	return &podIPs{base: ip.To4(), inUse: map[types.UID]string{}}, nil
}

func (p *podIPs) take(uid types.UID) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip, ok := p.inUse[uid]; ok {
		return ip, nil
	}
	taken := map[string]bool{}
	for _, ip := range p.inUse {
		taken[ip] = true
	}
	for n := 1; n < 250*128; n++ {
		ip := net.IPv4(p.base[0], p.base[1], p.base[2]+byte(n/250), byte(n%250)+1).String()
		if !taken[ip] {
			p.inUse[uid] = ip
			return ip, nil
		}
	}
	return "", errors.New("the pod range is exhausted")
}

func (p *podIPs) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, uid)
}
