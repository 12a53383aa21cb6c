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
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// PodRunner is the world's kubelet and kube-proxy for the pods of one
// Deployment, the provider's as clusterctl installed it: the real
// Deployment and ReplicaSet controllers create its pods and the real
// scheduler binds them; the runner then starts each pod's container as a
// process of a local binary, with what the pod spec says (arguments,
// environment, the Secret volumes, the ServiceAccount's credentials),
// reports the pod Running and Ready as the kubelet would once its readiness
// probe passes, and serves the ClusterIPs of the Services that select it.
//
// Pods here share the host's network, so each gets a loopback pod IP
// (testenv's PodCIDR) and the runner binds its listeners there through the
// manager's address flags (podargs.go).
type PodRunner struct {
	c          client.Client
	deployment types.NamespacedName
	binary     string
	// images maps container images to other binaries than binary, for a
	// Deployment upgraded from one release to another.
	images map[string]string
	// store runs the images of an OCI image layout.
	store      *imageStore
	dir        string
	kubeconfig func(namespace, serviceAccount string) ([]byte, error)
	ips        *podIPs
	// guestProxy is the env's GuestProxy, the pods' route to the guests.
	guestProxy string
	exited     chan event.GenericEvent
	// stopManager stops the runner's controllers.
	stopManager func() error

	mu   sync.Mutex
	pods map[types.NamespacedName]*container
	// services are the ClusterIP listeners, by Service.
	services map[types.NamespacedName][]net.Listener
}

// container is a pod's running process.
type container struct {
	uid      types.UID
	ip       string
	dir      string
	spec     *launch
	proc     *process
	restarts int32
	// grace is how long the process has to stop once signalled: the
	// pod's termination grace period, as the kubelet gives it.
	grace time.Duration
	// ready is read by the kube-proxy's connections too.
	ready   atomic.Bool
	started metav1.Time
}

// setup registers the runner's pod and Service controllers.
func (r *PodRunner) setup(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("world-kubelet").
		For(&corev1.Pod{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.podsOfNamespace)).
		WatchesRawSource(source.Channel(r.exited, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(r.reconcilePod)); err != nil {
		return err
	}
	// A Service starts selecting pods when they appear.
	return ctrl.NewControllerManagedBy(mgr).Named("world-kube-proxy").
		For(&corev1.Service{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.servicesOfNamespace)).
		Complete(reconcile.Func(r.reconcileService))
}

// servicesOfNamespace maps a pod to the Services of its namespace.
func (r *PodRunner) servicesOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() != r.deployment.Namespace {
		return nil
	}
	services := &corev1.ServiceList{}
	if err := r.c.List(ctx, services, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(services.Items))
	for i := range services.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&services.Items[i])})
	}
	return reqs
}

// podsOfNamespace maps a Secret to the runner's pods in its namespace: a
// pod waits for the Secrets it mounts (cert-manager writes the webhook's).
func (r *PodRunner) podsOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() != r.deployment.Namespace {
		return nil
	}
	pods, err := r.ownPods(ctx)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pods))
	for i := range pods {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods[i])})
	}
	return reqs
}

// selector is the Deployment's pod selector; nil until it exists.
func (r *PodRunner) selector(ctx context.Context) (labels.Selector, error) {
	d := &appsv1.Deployment{}
	if err := r.c.Get(ctx, r.deployment, d); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return metav1.LabelSelectorAsSelector(d.Spec.Selector)
}

// ownPods lists the Deployment's pods.
func (r *PodRunner) ownPods(ctx context.Context) ([]corev1.Pod, error) {
	sel, err := r.selector(ctx)
	if err != nil || sel == nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods, client.InNamespace(r.deployment.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

func (r *PodRunner) reconcilePod(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != r.deployment.Namespace {
		return reconcile.Result{}, nil
	}
	pod := &corev1.Pod{}
	err := r.c.Get(ctx, req.NamespacedName, pod)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	if err != nil {
		return reconcile.Result{}, r.stop(req.NamespacedName)
	}
	sel, err := r.selector(ctx)
	if err != nil || sel == nil || !sel.Matches(labels.Set(pod.Labels)) {
		return reconcile.Result{}, err
	}
	if !pod.DeletionTimestamp.IsZero() {
		// The kubelet stops the containers, then confirms the deletion.
		if err := r.stop(req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, client.IgnoreNotFound(r.c.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}))
	}
	if pod.Spec.NodeName == "" {
		return reconcile.Result{}, nil
	}
	ctr, err := r.ensureRunning(ctx, pod)
	if err != nil || ctr == nil {
		return reconcile.Result{}, err
	}
	if !ctr.ready.Load() {
		ctr.ready.Store(r.probe(ctx, pod, ctr))
	}
	if err := r.publishStatus(ctx, pod, ctr); err != nil {
		return reconcile.Result{}, err
	}
	if !ctr.ready.Load() {
		// The kubelet runs the readiness probe periodically.
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	return reconcile.Result{}, nil
}

// ensureRunning starts the pod's container unless it runs, and restarts it
// when it exited (restartPolicy Always). A nil container means the pod
// waits, for a Secret it mounts.
func (r *PodRunner) ensureRunning(ctx context.Context, pod *corev1.Pod) (*container, error) {
	key := client.ObjectKeyFromObject(pod)
	r.mu.Lock()
	ctr := r.pods[key]
	r.mu.Unlock()
	if ctr != nil && ctr.uid != pod.UID {
		if err := r.stop(key); err != nil {
			return nil, err
		}
		ctr = nil
	}
	if ctr != nil && !ctr.proc.done() {
		return ctr, nil
	}
	if ctr == nil {
		ip, err := r.ips.take(pod.UID)
		if err != nil {
			return nil, err
		}
		ctr = &container{uid: pod.UID, ip: ip, dir: filepath.Join(r.dir, string(pod.UID)), grace: terminationGrace(pod)}
		spec, err := r.prepare(ctx, pod, ctr)
		if err != nil || spec == nil {
			r.ips.release(pod.UID)
			return nil, err
		}
		ctr.spec = spec
	} else {
		_ = ctr.proc.log.Close()
		ctr.ready.Store(false)
	}
	exited := event.GenericEvent{Object: pod.DeepCopy()}
	proc, err := startProcess(ctr.spec, func() {
		select {
		case r.exited <- exited:
		default: // the runner stopped, or a reconcile is queued anyway
		}
	})
	if err != nil {
		return nil, err
	}
	// Under the lock: the failure reports read a running pod's container.
	r.mu.Lock()
	if ctr.proc != nil {
		ctr.restarts++
	}
	ctr.proc, ctr.started = proc, metav1.Now()
	r.pods[key] = ctr
	r.mu.Unlock()
	return ctr, nil
}

// probe runs the container's readiness probe once: an HTTP GET on the pod
// IP, as the kubelet sends it.
func (r *PodRunner) probe(ctx context.Context, pod *corev1.Pod, ctr *container) bool {
	c := pod.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		return true
	}
	port, ok := containerPort(&c, c.ReadinessProbe.HTTPGet.Port)
	if !ok {
		return false
	}
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(ctr.ip, fmt.Sprint(port)), c.ReadinessProbe.HTTPGet.Path)
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// publishStatus writes the pod status the kubelet would, when it changed.
func (r *PodRunner) publishStatus(ctx context.Context, pod *corev1.Pod, ctr *container) error {
	isReady := ctr.ready.Load()
	ready := corev1.ConditionFalse
	if isReady {
		ready = corev1.ConditionTrue
	}
	c := pod.Spec.Containers[0]
	want := pod.Status.DeepCopy()
	want.Phase = corev1.PodRunning
	want.PodIP, want.PodIPs = ctr.ip, []corev1.PodIP{{IP: ctr.ip}}
	want.HostIP, want.HostIPs = ctr.ip, []corev1.HostIP{{IP: ctr.ip}}
	if want.StartTime == nil {
		want.StartTime = &ctr.started
	}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		status := ready
		if t == corev1.PodScheduled || t == corev1.PodInitialized {
			status = corev1.ConditionTrue
		}
		setPodCondition(want, t, status)
	}
	want.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "world://" + string(pod.UID),
		Ready: isReady, Started: &isReady, RestartCount: ctr.restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ctr.started}},
	}}
	if podStatusEqual(&pod.Status, want) {
		return nil
	}
	pod.Status = *want
	return r.c.Status().Update(ctx, pod)
}

func setPodCondition(status *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			if status.Conditions[i].Status != s {
				status.Conditions[i].Status, status.Conditions[i].LastTransitionTime = s, metav1.Now()
			}
			return
		}
	}
	status.Conditions = append(status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.Now()})
}

// podStatusEqual compares what the runner sets, ignoring timestamps of the
// container state (which it sets on restarts only).
func podStatusEqual(a, b *corev1.PodStatus) bool {
	if a.Phase != b.Phase || a.PodIP != b.PodIP || len(a.Conditions) != len(b.Conditions) || len(a.ContainerStatuses) != len(b.ContainerStatuses) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Type != b.Conditions[i].Type || a.Conditions[i].Status != b.Conditions[i].Status {
			return false
		}
	}
	for i := range a.ContainerStatuses {
		x, y := a.ContainerStatuses[i], b.ContainerStatuses[i]
		if x.Ready != y.Ready || x.RestartCount != y.RestartCount || x.State.Running == nil || !x.State.Running.StartedAt.Equal(&y.State.Running.StartedAt) {
			return false
		}
	}
	return true
}

// stop stops a pod's container, if it runs, and frees its IP.
func (r *PodRunner) stop(key types.NamespacedName) error {
	r.mu.Lock()
	ctr := r.pods[key]
	delete(r.pods, key)
	r.mu.Unlock()
	if ctr == nil {
		return nil
	}
	r.ips.release(ctr.uid)
	var err error
	if ctr.proc != nil {
		err = ctr.proc.stop(ctr.grace)
	}
	if os.Getenv("TESTENV_VERBOSE") == "" {
		err = errors.Join(err, os.RemoveAll(ctr.dir))
	}
	return err
}

// terminationGrace is the pod's termination grace period, or Kubernetes'
// default of 30 s.
func terminationGrace(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// Log is the log of the running container of the named pod, empty when
// the runner runs none.
func (r *PodRunner) Log(pod string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, ctr := range r.pods {
		if key.Name == pod {
			data, _ := os.ReadFile(filepath.Join(ctr.dir, "container.log"))
			return string(data)
		}
	}
	return ""
}

// Crash kills the named pod's container with SIGKILL, as the OOM killer
// would: it has no chance to clean up, and the runner restarts it in the
// same pod, as the kubelet does.
func (r *PodRunner) Crash(pod string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, ctr := range r.pods {
		if key.Name == pod && ctr.proc != nil && !ctr.proc.done() {
			return ctr.proc.cmd.Process.Kill()
		}
	}
	return fmt.Errorf("pod %s runs no container here", pod)
}

// Logs returns the log of the container of the Deployment's pods the
// runner runs, for failure messages.
func (r *PodRunner) Logs() string {
	return r.LogTails(0)
}

// LogTails writes each pod's header (restarts, the container's state) and
// its log, only the last lines of it unless lines is 0, in the order of the
// pods' names: enough to see how each replica is doing when one of them
// fails a spec.
func (r *PodRunner) LogTails(lines int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(r.pods), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var out strings.Builder
	for _, key := range keys {
		ctr := r.pods[key]
		data, _ := os.ReadFile(filepath.Join(ctr.dir, "container.log"))
		log := string(data)
		if all := strings.Split(strings.TrimSuffix(log, "\n"), "\n"); lines > 0 && len(all) > lines {
			log = fmt.Sprintf("[%d lines before]\n%s\n", len(all)-lines, strings.Join(all[len(all)-lines:], "\n"))
		}
		fmt.Fprintf(&out, "== pod %s (restarts %d, container %s, started %s)\n%s", key, ctr.restarts, ctr.proc.state(), ctr.started.Format(time.RFC3339), log)
	}
	return out.String()
}

// close stops every container and ClusterIP listener.
func (r *PodRunner) close() error {
	r.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(r.pods))
	for k := range r.pods {
		keys = append(keys, k)
	}
	var errs []error
	for _, ls := range r.services {
		for _, l := range ls {
			if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	r.services = map[types.NamespacedName][]net.Listener{}
	r.mu.Unlock()
	for _, k := range keys {
		errs = append(errs, r.stop(k))
	}
	return errors.Join(errs...)
}

// StartPodRunner makes this process the kubelet and kube-proxy of a
// Deployment's pods on env. Stop it with Stop.
//
// A pod's container runs from its image in the OCI image layout at
// imageLayout (make image's out/image; empty: none): the image's files,
// entrypoint and user with the pod spec's command, arguments and
// securityContext, as a container runtime would. images maps the images
// of other releases (an upgrade) to binaries of their own; an image by tag
// found in neither runs binary as /manager, and one by digest fails the
// pod, as a kubelet could not pull it.
func StartPodRunner(env *testenv.Env, deployment types.NamespacedName, binary string, images map[string]string, imageLayout string) (*PodRunner, error) {
	ips, err := newPodIPs(env.PodCIDR)
	if err != nil {
		return nil, err
	}
	if err := ensureNode(env); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "capkv-pods-")
	if err != nil {
		return nil, err
	}
	rootfs := filepath.Join(dir, "images")
	// The images' files are the containers' to read, whoever they run as.
	if err := os.MkdirAll(rootfs, 0o755); err != nil { //nolint:gosec // read by the containers' users
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	admin, err := env.ControlPlane.AddUser(envtest.User{Name: "world-kubelet", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	r := &PodRunner{
		c: env.Client, deployment: deployment, binary: binary, images: images, dir: dir, ips: ips, guestProxy: env.GuestProxy,
		store:      &imageStore{layout: imageLayout, dir: rootfs},
		kubeconfig: func(namespace, sa string) ([]byte, error) { return impersonating(admin, namespace, sa) },
		exited:     make(chan event.GenericEvent, 16),
		pods:       map[types.NamespacedName]*container{},
		services:   map[types.NamespacedName][]net.Listener{},
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme,
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Metrics:    metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{deployment.Namespace: {}}}})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if err := r.setup(mgr); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	r.stopManager = func() error {
		cancel()
		return <-stopped
	}
	return r, nil
}

// Stop stops the runner, then every container it runs.
func (r *PodRunner) Stop() error {
	err := r.stopManager()
	err = errors.Join(err, r.close())
	if os.Getenv("TESTENV_VERBOSE") == "" {
		err = errors.Join(err, os.RemoveAll(r.dir))
	}
	return err
}

// ensureNode registers a node for the runner, as a kubelet does, on a
// management cluster without any (one whose infra cluster is external), so
// the scheduler can bind the provider's pod. Where the simulator's infra
// nodes exist the pod goes there.
func ensureNode(env *testenv.Env) error {
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes, client.Limit(1)); err != nil || len(nodes.Items) > 0 {
		return err
	}
	return sim.CreateNodes(ctx, env.Client, sim.NodeSpec{Name: "management", CPU: "8", Memory: "16Gi"})
}

// impersonating is the admin's kubeconfig acting as a ServiceAccount, with
// the groups the API server gives its tokens: the pod has exactly the
// permissions the installed RBAC grants it.
func impersonating(admin *envtest.AuthenticatedUser, namespace, serviceAccount string) ([]byte, error) {
	data, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	if serviceAccount == "" {
		serviceAccount = "default"
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount)
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	return clientcmd.Write(*cfg)
}
