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
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
)

// The tenant kubelet's Ready condition, as a real kubelet reports it on a
// node whose container runtime has no network yet (kubelet's
// nodestatus.ReadyCondition with the runtime's network error; containerd's
// CRI status says NetworkPluginNotReady until a CNI configuration is in
// its conf_dir, /etc/cni/net.d).
const (
	KubeletReadyReason      = "KubeletReady"
	KubeletNotReadyReason   = "KubeletNotReady"
	KubeletNoNetworkMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
	// CNIConfDir is where a CNI's agent writes the configuration the
	// container runtime waits for.
	CNIConfDir = "/etc/cni/net.d"
	// kubeletSyncPeriod is how often the world's kubelets look for a CNI
	// (a real one checks its runtime every 5 s).
	kubeletSyncPeriod = time.Second
)

// daemonSetTolerations are the tolerations Kubernetes' DaemonSet controller
// adds to every daemon pod (pkg/controller/daemon/util,
// AddOrUpdateDaemonPodTolerations); network-unavailable only to pods on the
// host network.
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// WritesCNIConfig reports whether a pod of the DaemonSet would run on the
// node and write a CNI configuration there: its template mounts the host's
// CNIConfDir, its node selector and required affinity match the node, and
// it tolerates the node's NoSchedule and NoExecute taints.
func WritesCNIConfig(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	spec := ds.Spec.Template.Spec
	mounts := false
	for _, v := range spec.Volumes {
		if v.HostPath != nil && filepath.Clean(v.HostPath.Path) == CNIConfDir {
			mounts = true
		}
	}
	if !mounts {
		return false
	}
	pod := &corev1.Pod{Spec: spec}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	tolerations := append(append([]corev1.Toleration{}, spec.Tolerations...), daemonSetTolerations...)
	if spec.HostNetwork {
		tolerations = append(tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// runKubelets plays the runtime check of every tenant kubelet that waits
// for its network, every second until ctx ends: its Node turns Ready once
// a CNI would have written its configuration there.
func (w *Workloads) runKubelets(ctx context.Context) {
	wait.UntilWithContext(ctx, w.syncKubelets, kubeletSyncPeriod)
}

func (w *Workloads) syncKubelets(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, nodes := range w.waiting {
		if rg := w.mgr.GetResourceGroup(name); rg != nil {
			// An error is the next tick's to retry, as a kubelet does.
			_ = w.syncNetwork(ctx, rg.GetClient(), name, nodes)
		}
	}
}

// runCloudControllers has cc play the tenants' cloud controller managers.
func (w *Workloads) runCloudControllers(cc *cloudController) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cloud = cc
}

// runCloud runs the tenants' cloud controller managers every second, in a
// goroutine of their own: their calls to the infra API server do not hold
// up the kubelets.
func (w *Workloads) runCloud(ctx context.Context) {
	wait.UntilWithContext(ctx, w.syncCloud, kubeletSyncPeriod)
}

func (w *Workloads) syncCloud(ctx context.Context) {
	w.mu.Lock()
	cc, clusters := w.cloud, make([]string, 0, len(w.addrs))
	for cluster := range w.addrs {
		clusters = append(clusters, cluster)
	}
	w.mu.Unlock()
	if cc == nil {
		return
	}
	for _, name := range clusters {
		if rg := w.mgr.GetResourceGroup(name); rg != nil {
			// An error is the next tick's to retry, as the controllers
			// requeue their objects.
			_ = cc.sync(ctx, rg.GetClient(), name)
			_ = cc.syncCSI(ctx, rg.GetClient(), name)
		}
	}
}

// CloudControllerError is the last error the tenant's cloud controller
// manager met on an object, a Node by name or a Service by
// namespace/name, or "" (none, or it succeeded since).
func (w *Workloads) CloudControllerError(cluster types.NamespacedName, object string) string {
	return w.cloudFailure(groupName(cluster), object)
}

// CSIControllerError is the last error the tenant's CSI controller met on
// an object, by kind and name ("PersistentVolumeClaim default/data",
// "VolumeAttachment csi-…", "VirtualMachine <name>" for its hot-plug
// calls), or "".
func (w *Workloads) CSIControllerError(cluster types.NamespacedName, object string) string {
	return w.cloudFailure(csiKey(groupName(cluster)), object)
}

// cloudFailure is the last error kept under a key, or "".
func (w *Workloads) cloudFailure(key, object string) string {
	w.mu.Lock()
	cc := w.cloud
	w.mu.Unlock()
	if cc == nil {
		return ""
	}
	return cc.failure(key, object)
}

// syncNetwork turns Ready the Nodes of one cluster that wait for a CNI the
// cluster now has, and forgets those that wait no more.
func (w *Workloads) syncNetwork(ctx context.Context, c inmemoryruntime.Client, cluster string, waiting map[string]bool) error {
	var daemonSets []appsv1.DaemonSet
	listed := false
	for name := range waiting {
		node := &corev1.Node{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, node); apierrors.IsNotFound(err) {
			delete(waiting, name)
			continue
		} else if err != nil {
			return err
		}
		if ready := readyCondition(node); ready == nil || ready.Reason != KubeletNotReadyReason {
			// Lost or Ready: its kubelet posts again when it rejoins.
			delete(waiting, name)
			continue
		}
		if !listed {
			if err := listAs(ctx, c, appsv1.SchemeGroupVersion.WithKind("DaemonSetList"), &daemonSets); err != nil {
				return err
			}
			listed = true
		}
		for j := range daemonSets {
			if WritesCNIConfig(&daemonSets[j], node) {
				if w.cniWritten[cluster] == nil {
					w.cniWritten[cluster] = map[string]bool{}
				}
				w.cniWritten[cluster][name] = true
				if err := setNodeReady(ctx, c, name, corev1.ConditionTrue); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				delete(waiting, name)
				break
			}
		}
	}
	if len(waiting) == 0 {
		delete(w.waiting, cluster)
	}
	return nil
}

// listAs lists objects of the in-memory API server into typed items. It
// lists unstructured: objects clients wrote as unstructured (the
// ClusterResourceSet's, Cluster API's patches) are stored that way, and a
// typed list refuses them.
func listAs[T any](ctx context.Context, c inmemoryruntime.Client, gvk schema.GroupVersionKind, items *[]T) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk)
	if err := c.List(ctx, list); err != nil {
		return err
	}
	*items = make([]T, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &(*items)[i]); err != nil {
			return err
		}
	}
	return nil
}

// kubeletReady is the Ready status a joining node's kubelet posts: True
// once a CNI configuration was ever written there (it stays on disk across
// reboots), else False.
func (w *Workloads) kubeletReady(cluster types.NamespacedName, node string) corev1.ConditionStatus {
	if w.cniWritten[groupName(cluster)][node] {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// readyConditionWith is the Ready condition a kubelet posts with status.
func readyConditionWith(status corev1.ConditionStatus) corev1.NodeCondition {
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.Now()}
	switch status {
	case corev1.ConditionTrue:
		cond.Reason, cond.Message = KubeletReadyReason, "kubelet is posting ready status"
	case corev1.ConditionFalse:
		cond.Reason, cond.Message = KubeletNotReadyReason, KubeletNoNetworkMessage
	default:
		cond.Reason, cond.Message = "NodeStatusUnknown", "Kubelet stopped posting node status."
	}
	return cond
}

// readyTaints are the taints the tenant's node lifecycle controller keeps
// on a Node by its Ready status (TaintNodesByCondition): not-ready while
// False, unreachable while Unknown, none once True.
func readyTaints(taints []corev1.Taint, status corev1.ConditionStatus) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints)+1)
	for _, t := range taints {
		if t.Key != corev1.TaintNodeNotReady && t.Key != corev1.TaintNodeUnreachable {
			out = append(out, t)
		}
	}
	switch status {
	case corev1.ConditionFalse:
		out = append(out, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	case corev1.ConditionUnknown:
		out = append(out, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}
