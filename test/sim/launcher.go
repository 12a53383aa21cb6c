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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const launcherImage = "quay.io/kubevirt/virt-launcher:v1.9.0"

// launcherIPs are the pod IPs launcher pods already hold, which an earlier
// simulator gave them when the world restarted from kept state.
func (s *Simulator) launcherIPs(ctx context.Context) ([]string, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}); err != nil {
		return nil, err
	}
	var ips []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips, nil
}

// launcherPod finds the virt-launcher pod of a VMI.
func (s *Simulator) launcherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(vmi.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], vmi) {
			return &pods.Items[i], nil
		}
	}
	return nil, nil
}

// createLauncherPod creates the virt-launcher pod with what KubeVirt puts
// there, so that the real scheduler places it as it would. See
// docs/kubevirt-behaviour.md#the-virt-launcher-pod-carries-the-vmi-labels-and-placement
// and docs/kubevirt-behaviour.md#launcher-pod-resource-requests-include-an-overhead.
func (s *Simulator) createLauncherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	labels[kubevirtv1.AppLabel] = "virt-launcher"
	labels[kubevirtv1.CreatedByLabel] = string(vmi.UID)
	hostname := vmi.Spec.Hostname
	if hostname == "" {
		hostname = vmi.Name
	}
	labels["vm.kubevirt.io/name"] = hostname
	annotations := map[string]string{"kubevirt.io/domain": vmi.Name}
	for k, v := range vmi.Annotations {
		annotations[k] = v
	}
	if networks := multusNetworks(vmi); networks != "" {
		annotations[multusNetworksAnnotation] = networks
	}
	if def := multusDefault(vmi); def != "" {
		annotations[multusDefaultAnnotation] = def
	}
	nodeSelector := map[string]string{kubevirtv1.NodeSchedulable: "true", corev1.LabelArchStable: "amd64"}
	if dedicatedCPUs(vmi) {
		nodeSelector[CPUManagerLabel] = "true"
	}
	for k, v := range vmi.Spec.NodeSelector {
		nodeSelector[k] = v
	}
	var volumes []corev1.Volume
	for _, claim := range claimNames(vmi) {
		volumes = append(volumes, corev1.Volume{Name: claim, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-launcher-" + vmi.Name + "-", Namespace: vmi.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "compute", Image: launcherImage,
				Resources: launcherResources(vmi),
			}},
			NodeSelector:                  nodeSelector,
			Affinity:                      vmi.Spec.Affinity,
			Tolerations:                   vmi.Spec.Tolerations,
			TopologySpreadConstraints:     vmi.Spec.TopologySpreadConstraints,
			SchedulerName:                 vmi.Spec.SchedulerName,
			PriorityClassName:             vmi.Spec.PriorityClassName,
			DNSPolicy:                     vmi.Spec.DNSPolicy,
			DNSConfig:                     vmi.Spec.DNSConfig,
			Hostname:                      hostname,
			Subdomain:                     vmi.Spec.Subdomain,
			Volumes:                       volumes,
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: new(int64),
			RestartPolicy:                 corev1.RestartPolicyNever,
		},
	}
	if err := controllerutil.SetControllerReference(vmi, pod, s.client.Scheme()); err != nil {
		return err
	}
	return s.client.Create(ctx, pod)
}

// launcherResources gives the compute container's requests and limits
// (docs/kubevirt-behaviour.md#launcher-pod-resource-requests-include-an-overhead,
// #dedicated-cpus-and-hugepages): dedicated CPUs make the pod Guaranteed
// with whole CPUs, one more for an isolated emulator thread; hugepages
// back the guest memory, so the memory request is only the overhead;
// limits the template sets are kept.
func launcherResources(vmi *kubevirtv1.VirtualMachineInstance) corev1.ResourceRequirements {
	d := vmi.Spec.Domain
	requests := launcherRequests(vmi)
	limits := corev1.ResourceList{}
	for name, q := range d.Resources.Limits {
		limits[name] = q
	}
	if m := d.Memory; m != nil && m.Hugepages != nil && m.Hugepages.PageSize != "" {
		guest := guestMemory(vmi)
		pages := corev1.ResourceName(corev1.ResourceHugePagesPrefix + m.Hugepages.PageSize)
		requests[pages], limits[pages] = guest, guest
		overhead := requests[corev1.ResourceMemory]
		overhead.Sub(guest)
		requests[corev1.ResourceMemory] = overhead
	}
	if dedicatedCPUs(vmi) {
		cpus := vcpus(vmi)
		if d.CPU.IsolateEmulatorThread {
			cpus++
		}
		requests[corev1.ResourceCPU] = *resource.NewQuantity(cpus, resource.DecimalSI)
		limits[corev1.ResourceCPU] = requests[corev1.ResourceCPU]
		limits[corev1.ResourceMemory] = requests[corev1.ResourceMemory]
	}
	if len(limits) == 0 {
		limits = nil
	}
	return corev1.ResourceRequirements{Requests: requests, Limits: limits}
}

func dedicatedCPUs(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.Spec.Domain.CPU != nil && vmi.Spec.Domain.CPU.DedicatedCPUPlacement
}

func vcpus(vmi *kubevirtv1.VirtualMachineInstance) int64 {
	if c := vmi.Spec.Domain.CPU; c != nil {
		return int64(max(c.Sockets, 1)) * int64(max(c.Cores, 1)) * int64(max(c.Threads, 1))
	}
	return 1
}

// guestMemory is the memory the guest sees: the request, else the guest
// memory, else the limit.
func guestMemory(vmi *kubevirtv1.VirtualMachineInstance) resource.Quantity {
	d := vmi.Spec.Domain
	switch {
	case d.Resources.Requests.Memory() != nil && !d.Resources.Requests.Memory().IsZero():
		return d.Resources.Requests.Memory().DeepCopy()
	case d.Memory != nil && d.Memory.Guest != nil:
		return d.Memory.Guest.DeepCopy()
	case d.Resources.Limits.Memory() != nil:
		return d.Resources.Limits.Memory().DeepCopy()
	}
	return resource.Quantity{}
}

// launcherRequests gives the compute container's requests: memory is the
// guest's plus an overhead, CPU the request or 100m per vCPU.
func launcherRequests(vmi *kubevirtv1.VirtualMachineInstance) corev1.ResourceList {
	d := vmi.Spec.Domain
	memory := guestMemory(vmi)
	n := vcpus(vmi)
	overhead := memory.Value()/512 + n*8<<20 + 8<<20 + 32<<20 + 180<<20
	memory.Add(*resource.NewQuantity(overhead, resource.BinarySI))
	cpu := resource.NewMilliQuantity(n*100, resource.DecimalSI)
	if r, ok := d.Resources.Requests[corev1.ResourceCPU]; ok {
		cpu = &r
	}
	return corev1.ResourceList{corev1.ResourceMemory: memory, corev1.ResourceCPU: *cpu}
}

// setupLauncherController acts for the kubelet the simulated nodes do not
// have: a virt-launcher pod bound to a node becomes Running and Ready with a
// pod IP.
func (s *Simulator) setupLauncherController(mgr ctrl.Manager) error {
	bound := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isBoundLauncher(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return isBoundLauncher(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-kubelet").
		For(&corev1.Pod{}, builder.WithPredicates(bound)).
		WithOptions(concurrency()).
		Complete(reconcile.Func(s.reconcileLauncher))
}

func isBoundLauncher(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && pod.Labels[kubevirtv1.AppLabel] == "virt-launcher" && pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodRunning
}

func (s *Simulator) reconcileLauncher(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := s.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isBoundLauncher(pod) || !pod.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if missing, err := s.missingNetwork(ctx, pod); err != nil || missing != "" {
		if missing != "" {
			// Multus cannot set up the sandbox; the kubelet retries.
			s.event(ctx, pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", fmt.Sprintf(
				"Failed to create pod sandbox: error adding pod %s to CNI network \"multus-cni-network\": "+
					"cannot find a network-attachment-definition (%s)", pod.Name, missing))
		}
		return reconcile.Result{RequeueAfter: s.scaled(10*time.Second) + 100*time.Millisecond}, err
	}
	if err := s.ips.seed(func() ([]string, error) { return s.launcherIPs(ctx) }); err != nil {
		return reconcile.Result{}, err
	}
	now := metav1.NewTime(time.Now())
	ip := s.ips.podIP()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	// The kubelet reports its node's address as the host IP.
	node := &corev1.Node{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ip := InternalIP(node); ip != "" {
		pod.Status.HostIP, pod.Status.HostIPs = ip, append(pod.Status.HostIPs, corev1.HostIP{IP: ip})
	}
	pod.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		setPodCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "compute", Image: launcherImage, Ready: true, Started: new(bool),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}
	*pod.Status.ContainerStatuses[0].Started = true
	return reconcile.Result{}, s.client.Status().Update(ctx, pod)
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
