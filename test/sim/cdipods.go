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

package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The pods CDI's controllers create, by the value of their component label
// (containerized-data-importer pkg/common/common.go).
const (
	cdiComponentLabel = "cdi.kubevirt.io"
	cdiImporter       = "importer"
	cdiCloneSource    = "cdi-clone-source"
	cdiUploadServer   = "cdi-upload-server"
	// annCDIOwnerRef names, on a clone source pod, the claim it copies to.
	annCDIOwnerRef = "cdi.kubevirt.io/storage.ownerRef"
	// cdiCronPoller labels the pods of a DataImportCron's poller Jobs.
	cdiCronPoller = "cdi.kubevirt.io/dataImportCronPoller"
)

// What the poller writes on its DataImportCron
// (pkg/controller/dataimportcron-controller.go).
const (
	annLastCronTime        = "cdi.kubevirt.io/storage.import.lastCronTime"
	annSourceDesiredDigest = "cdi.kubevirt.io/storage.import.sourceDesiredDigest"
)

// What an importer container is told, as environment variables
// (containerized-data-importer pkg/common/common.go).
const (
	envImporterSource   = "IMPORTER_SOURCE"
	envImporterEndpoint = "IMPORTER_ENDPOINT"
	sourceNone          = "none"
)

// Import endpoints containing these words fail as cdi-importer fails on
// them: it exits with its message and is restarted, never succeeding.
const (
	FailUnreachable = "unreachable"
	FailBadImage    = "bad-image"
)

// blankImageTime is how long an importer takes to create a blank disk,
// before scaling.
const blankImageTime = time.Second

// failAfter is how long a failing importer runs before it exits, before
// scaling: a refused connection or an unreadable header shows at once.
const failAfter = time.Second

// terminationMessage is the JSON a CDI pod that succeeded writes to its
// termination log (containerized-data-importer pkg/common TerminationMessage).
type terminationMessage struct {
	Message              *string `json:"message,omitempty"`
	PreallocationApplied *bool   `json:"preallocationApplied,omitempty"`
}

// setupCDIPods plays the kubelet for the pods the real cdi-controller
// creates and the real scheduler binds (docs/simulator.md#cdis-pods), and
// for virt-controller's hot-plug attachment pods, which only hold volumes
// on a node.
func (s *Simulator) setupCDIPods(mgr ctrl.Manager) error {
	bound := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isBoundCDIPod(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return isBoundCDIPod(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(e event.GenericEvent) bool { return isBoundCDIPod(e.Object) },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-cdi-pods").
		For(&corev1.Pod{}, builder.WithPredicates(bound)).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileCDIPod))
}

// isBoundCDIPod says whether the kubelet has work on a pod: one of CDI's,
// or a hot-plug attachment pod, which runs as they do, bound to a node,
// not ended or being deleted.
func isBoundCDIPod(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || len(pod.Spec.Containers) == 0 {
		return false
	}
	_, poller := pod.Labels[cdiCronPoller]
	switch pod.Labels[cdiComponentLabel] {
	case cdiImporter, cdiCloneSource, cdiUploadServer:
	default:
		if !poller && !isAttachmentPod(pod) {
			return false
		}
	}
	return !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func (s *Simulator) reconcileCDIPod(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := s.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isBoundCDIPod(pod) || s.nodeFailed(pod.Spec.NodeName) {
		return reconcile.Result{}, nil
	}
	if !pod.DeletionTimestamp.IsZero() {
		// Its containers stop at once; nothing of theirs outlives the pod.
		err := s.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if pod.Status.Phase != corev1.PodRunning {
		if err := s.startPod(ctx, pod); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		// The upload server answers its readiness probe once it
		// listens, at once; the other pods have no probe.
		now := metav1.Now()
		for i := range pod.Status.ContainerStatuses {
			pod.Status.ContainerStatuses[i].Ready = true
		}
		setPodConditionStatus(pod, corev1.ContainersReady, true, now)
		setPodConditionStatus(pod, corev1.PodReady, true, now)
		return reconcile.Result{}, s.client.Status().Update(ctx, pod)
	}
	if _, ok := pod.Labels[cdiCronPoller]; ok {
		return reconcile.Result{}, s.runPoller(ctx, pod)
	}
	switch pod.Labels[cdiComponentLabel] {
	case cdiImporter:
		return s.runImporter(ctx, pod)
	case cdiCloneSource:
		return s.runCloneSource(ctx, pod)
	}
	return reconcile.Result{}, nil
}

// runImporter plays cdi-importer: it writes the image (or a blank disk)
// into its claim at the configured rate and exits 0 with CDI's
// termination message; a source it cannot read makes it exit 1 with the
// importer's own message, and the kubelet restarts it with a growing
// back-off (restartPolicy OnFailure), as CrashLoopBackOff does.
func (s *Simulator) runImporter(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	cs := &pod.Status.ContainerStatuses[0]
	if t := cs.State.Terminated; t != nil {
		backoff := s.scaled(min(10*time.Second<<min(cs.RestartCount, 5), 5*time.Minute))
		if wait := backoff - time.Since(t.FinishedAt.Time); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		cs.RestartCount++
		cs.LastTerminationState = cs.State
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		return reconcile.Result{}, s.client.Status().Update(ctx, pod)
	}
	env := containerEnv(pod.Spec.Containers[0])
	source, endpoint := env[envImporterSource], env[envImporterEndpoint]
	elapsed := time.Since(cs.State.Running.StartedAt.Time)
	target, err := s.ownerClaim(ctx, pod)
	if err != nil || target == nil {
		return reconcile.Result{}, err
	}
	if message := s.importFailure(source, endpoint, target); message != "" {
		if wait := s.scaled(failAfter) - elapsed; wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: message, StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.Now()}}
		cs.Ready = false
		return reconcile.Result{RequeueAfter: s.scaled(10 * time.Second)}, s.client.Status().Update(ctx, pod)
	}
	duration, content := s.scaled(blankImageTime), "blank"
	if source != sourceNone {
		duration, content = s.importDuration(pod.Namespace), endpoint
	}
	if wait := duration - elapsed; wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := s.fill(ctx, target, content); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.succeed(ctx, pod, "Import Complete"); err != nil {
		return reconcile.Result{}, err
	}
	if source != sourceNone {
		s.Counters.AddIn(pod.Namespace, Imports, 1)
		s.Counters.AddIn(pod.Namespace, ImportBytes, s.opts.ImageSize)
	}
	return reconcile.Result{}, nil
}

// importFailure is the message cdi-importer exits with on a source it
// cannot read (cmd/cdi-importer/importer.go), picked by words in the URL,
// or on an image larger than the claim's usable space (pkg/image/qemu.go
// Validate: the claim's capacity less CDI's default filesystem overhead of
// 5.5%).
func (s *Simulator) importFailure(source, endpoint string, target *corev1.PersistentVolumeClaim) string {
	if source == sourceNone {
		return ""
	}
	switch {
	case strings.Contains(endpoint, FailUnreachable):
		return fmt.Sprintf("Unable to connect to %s data source: Get %q: dial tcp: lookup failed: no such host", source, endpoint)
	case strings.Contains(endpoint, FailBadImage):
		return "Unable to process data: Unable to transfer source data to target file: unknown image format"
	}
	capacity := target.Status.Capacity[corev1.ResourceStorage]
	available := capacity.Value()
	if volumeMode(target) == corev1.PersistentVolumeFilesystem {
		available = int64(float64(available) * (1 - filesystemOverhead))
	}
	if available < s.opts.ImageSize {
		return fmt.Sprintf("Unable to process data: virtual image size %d is larger than the reported available storage %d. "+
			"A larger PVC is required.", s.opts.ImageSize, available)
	}
	return ""
}

// filesystemOverhead is CDI's default share of a Filesystem volume its
// file system takes (CDIConfig filesystemOverhead.global).
const filesystemOverhead = 0.055

func volumeMode(pvc *corev1.PersistentVolumeClaim) corev1.PersistentVolumeMode {
	if pvc.Spec.VolumeMode == nil {
		return corev1.PersistentVolumeFilesystem
	}
	return *pvc.Spec.VolumeMode
}

// runCloneSource plays a host-assisted clone: the source pod streams its
// claim to the target's upload server at the import rate; then both exit 0,
// the upload server with CDI's "Clone Complete".
func (s *Simulator) runCloneSource(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	cs := &pod.Status.ContainerStatuses[0]
	if wait := s.transferTime() - time.Since(cs.State.Running.StartedAt.Time); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	ns, name, ok := strings.Cut(pod.Annotations[annCDIOwnerRef], "/")
	if !ok {
		return reconcile.Result{}, fmt.Errorf("clone source pod %s has no target in %s", pod.Name, annCDIOwnerRef)
	}
	source, target := &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: claimOf(pod)}, source); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, target); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	upload, err := s.uploadServer(ctx, target)
	if err != nil || upload == nil {
		// The stream has nowhere to go until the upload server runs.
		return reconcile.Result{RequeueAfter: s.scaled(time.Second)}, err
	}
	content, err := s.content(ctx, source)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := s.fill(ctx, target, content); err != nil {
		return reconcile.Result{}, err
	}
	// A retry after the upload server already ended (the source pod's
	// update failed) only ends the source pod, counting the clone once.
	if upload.Status.Phase != corev1.PodSucceeded {
		if err := s.succeed(ctx, upload, "Clone Complete"); err != nil {
			return reconcile.Result{}, err
		}
		s.Counters.AddIn(upload.Namespace, Clones, 1)
		s.Counters.AddIn(upload.Namespace, HostAssistedClones, 1)
		s.Counters.AddIn(upload.Namespace, CloneBytes, s.opts.ImageSize)
	}
	return reconcile.Result{}, s.succeed(ctx, pod, "")
}

// runPoller plays cdi-source-update-poller
// (tools/cdi-source-update-poller/main.go), as the service account its pod
// runs as: it reads the digest the registry serves for the cron's URL and
// writes it, with the poll's time, on the DataImportCron; CDI imports a
// digest it has not imported yet. A registry it cannot reach makes it exit
// 1, and the Job retries.
func (s *Simulator) runPoller(ctx context.Context, pod *corev1.Pod) error {
	args := pod.Spec.Containers[0].Command
	flag := func(name string) string {
		for i := range args[:max(len(args)-1, 0)] {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	url, ns, name := flag("-url"), flag("-ns"), flag("-cron")
	if strings.Contains(url, FailUnreachable) {
		return s.fail(ctx, pod, fmt.Sprintf("Failed to get image digest: pinging container registry %s: dial tcp: lookup failed: no such host", url))
	}
	c, err := s.serviceAccountClient(pod)
	if err != nil {
		return err
	}
	cron := &cdiv1.DataImportCron{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cron); err != nil {
		return s.fail(ctx, pod, fmt.Sprintf("Failed getting DataImportCron %s/%s: %v", ns, name, err))
	}
	if cron.Annotations == nil {
		cron.Annotations = map[string]string{}
	}
	cron.Annotations[annLastCronTime] = time.Now().UTC().Format(time.RFC3339)
	cron.Annotations[annSourceDesiredDigest] = s.Images.Digest(url)
	if err := c.Update(ctx, cron); err != nil {
		return s.fail(ctx, pod, fmt.Sprintf("Failed updating DataImportCron %s/%s: %v", ns, name, err))
	}
	return s.succeed(ctx, pod, "")
}

// fail ends a pod whose first container exited 1 with a message (restart
// policy Never).
func (s *Simulator) fail(ctx context.Context, pod *corev1.Pod, message string) error {
	endPod(pod)
	pod.Status.Phase = corev1.PodFailed
	t := pod.Status.ContainerStatuses[0].State.Terminated
	t.ExitCode, t.Reason, t.Message = 1, "Error", message
	return s.client.Status().Update(ctx, pod)
}

// serviceAccountClient reaches the API server as a pod's service account.
func (s *Simulator) serviceAccountClient(pod *corev1.Pod) (client.Client, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	user := "system:serviceaccount:" + pod.Namespace + ":" + sa
	if c, ok := s.accounts.Load(user); ok {
		return c.(client.Client), nil
	}
	cfg := rest.CopyConfig(s.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + pod.Namespace, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: s.client.Scheme()})
	if err != nil {
		return nil, err
	}
	s.accounts.Store(user, c)
	return c, nil
}

// uploadServer finds the upload server of a claim that runs or has ended
// well.
func (s *Simulator) uploadServer(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(claim.Namespace), client.MatchingLabels{cdiComponentLabel: cdiUploadServer}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if metav1.IsControlledBy(p, claim) && p.DeletionTimestamp.IsZero() &&
			(p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded) {
			return p, nil
		}
	}
	return nil, nil
}

// SetImportTime makes every image import into namespace take d, unscaled,
// as a slow download from a distant server does; 0 goes back to the
// configured rate. An import under way takes the new time from its start.
func (s *Simulator) SetImportTime(namespace string, d time.Duration) {
	if d <= 0 {
		s.importTimes.Delete(namespace)
		return
	}
	s.importTimes.Store(namespace, d)
}

// importDuration is how long importing one image into namespace takes.
func (s *Simulator) importDuration(namespace string) time.Duration {
	if d, ok := s.importTimes.Load(namespace); ok {
		return d.(time.Duration)
	}
	return s.transferTime()
}

// transferTime is how long moving one image takes.
func (s *Simulator) transferTime() time.Duration {
	return s.scaled(time.Duration(float64(s.opts.ImageSize) / float64(s.opts.ImportBytesPerSecond) * float64(time.Second)))
}

// ownerClaim is the claim a CDI pod works for: its controller.
func (s *Simulator) ownerClaim(ctx context.Context, pod *corev1.Pod) (*corev1.PersistentVolumeClaim, error) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "PersistentVolumeClaim" {
		return nil, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}, pvc)
	return pvc, client.IgnoreNotFound(err)
}

// fill records what a claim's volume now holds, on the volume: CDI's
// populators hand the volume of a claim they filled to another claim.
func (s *Simulator) fill(ctx context.Context, pvc *corev1.PersistentVolumeClaim, content string) error {
	pv := &corev1.PersistentVolume{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return fmt.Errorf("volume of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	if pv.Annotations[ContentAnnotation] == content {
		return nil
	}
	patch := client.MergeFrom(pv.DeepCopy())
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	pv.Annotations[ContentAnnotation] = content
	return s.client.Patch(ctx, pv, patch)
}

// content says what a claim holds: what its volume was filled with.
func (s *Simulator) content(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (string, error) {
	if pvc.Spec.VolumeName == "" {
		return "", nil
	}
	pv := &corev1.PersistentVolume{}
	err := s.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv)
	return pv.Annotations[ContentAnnotation], client.IgnoreNotFound(err)
}

// succeed ends a pod whose first container exited 0 with a termination
// message (none when message is empty).
func (s *Simulator) succeed(ctx context.Context, pod *corev1.Pod, message string) error {
	endPod(pod)
	if message != "" {
		raw, err := json.Marshal(terminationMessage{Message: &message, PreallocationApplied: new(bool)})
		if err != nil {
			return err
		}
		pod.Status.ContainerStatuses[0].State.Terminated.Message = string(raw)
	}
	return s.client.Status().Update(ctx, pod)
}

// claimOf is the first claim a pod mounts.
func claimOf(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

func containerEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}
