package machine

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/failuredomains"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantnet"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmstatus"
)

// Reconcile moves a machine whose infra cluster is available towards a
// running, bootstrapped VM and reports where it stands.
func (s *Service) Reconcile(ctx context.Context, sc *Scope) (ctrl.Result, error) {
	km := sc.KubevirtMachine
	vm := &kubevirtv1.VirtualMachine{}
	key := types.NamespacedName{Namespace: sc.VMNamespace(), Name: sc.VMName()}
	found, err := get(ctx, sc.Infra.Client, key, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !found && km.Spec.ProviderID != nil {
		// The cache may lag behind our own create; ask the API server.
		if found, err = get(ctx, sc.Infra.APIReader, key, vm); err != nil {
			return ctrl.Result{}, err
		}
		if !found {
			s.setVM(km, vmstatus.State{Reason: infrav1.VMDeletedReason, Warning: true, Message: fmt.Sprintf(
				"VirtualMachine %s was deleted outside the provider; the machine is not recreated with a new identity, delete the Machine (a MachineHealthCheck does) to replace it", key)})
			setBootstrap(km, metav1.ConditionFalse, infrav1.VMDeletedReason, "the VirtualMachine is gone")
			markNotProvisioned(km)
			return ctrl.Result{}, nil
		}
	}
	if !found {
		if _, err := s.create(ctx, sc, key); err != nil {
			return ctrl.Result{}, err
		}
		if c := conditions.Get(km, infrav1.VirtualMachineReadyCondition); c != nil &&
			(c.Reason == infrav1.CloneNotAuthorizedReason || c.Reason == infrav1.GoldenImageFailedReason) {
			// RBAC changes and refusals of the infra API are not watched.
			return ctrl.Result{RequeueAfter: s.recheck()}, nil
		}
		return ctrl.Result{}, nil
	}
	if !s.ours(km, vm) {
		s.setVM(km, vmstatus.State{Reason: infrav1.VMConflictReason, Warning: true, Message: fmt.Sprintf(
			"VirtualMachine %s exists but was not created for this KubevirtMachine; rename or remove it", key)})
		return ctrl.Result{}, nil
	}
	if km.Spec.ProviderID == nil {
		km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	}
	if err := s.adoptUserData(ctx, sc, vm); err != nil {
		return ctrl.Result{}, err
	}
	return s.observe(ctx, sc, vm)
}

// observe reports the state of an existing VM and runs the bootstrap check.
func (s *Service) observe(ctx context.Context, sc *Scope, vm *kubevirtv1.VirtualMachine) (ctrl.Result, error) {
	km := sc.KubevirtMachine
	var vmi *kubevirtv1.VirtualMachineInstance
	candidate := &kubevirtv1.VirtualMachineInstance{}
	found, err := get(ctx, sc.Infra.Client, client.ObjectKeyFromObject(vm), candidate)
	if err != nil {
		return ctrl.Result{}, err
	}
	if found {
		vmi = candidate
	}
	var dvs []*cdiv1.DataVolume
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		found, err := get(ctx, sc.Infra.Client, types.NamespacedName{Namespace: vm.Namespace, Name: t.Name}, dv)
		if err != nil {
			return ctrl.Result{}, err
		}
		if found {
			dvs = append(dvs, dv)
		}
	}
	if golden.Needed(km.Spec.RootDisk) {
		km.Status.GoldenImage = GoldenImageOf(sc.Infra.Secret, sc.VMNamespace(), km.Spec.RootDisk)
	}
	if golden.Needed(km.Spec.RootDisk) && !rootDiskCloned(vm, dvs) {
		if err := s.ensureGoldenVolume(ctx, sc); err != nil {
			return ctrl.Result{}, err
		}
	}
	state := vmstatus.Of(vm, vmi, dvs)
	nodeNetwork := ""
	if vmi != nil {
		nodeNetwork = vmstatus.NodeNetwork(vmi, tenantnet.NodeAddressNetwork(sc.KubevirtCluster, km))
		if names := vmstatus.NetworkNames(vmi); !slices.Contains(names, nodeNetwork) {
			state = vmstatus.State{Running: state.Running, Reason: infrav1.NodeNetworkNotFoundReason, Warning: true,
				Message: fmt.Sprintf("nodeAddressNetwork %q is not a network of the VM; it has %v", nodeNetwork, names)}
		} else if state.Ready && !vmstatus.HasNodeAddress(vmi, nodeNetwork) {
			// KubeVirt can report an interface before its IP (FACTS B7).
			state = vmstatus.State{Running: true, Reason: infrav1.BootingReason,
				Message: fmt.Sprintf("VM instance is ready but network %q has no IP address yet", nodeNetwork)}
		}
		if state.Running {
			km.Status.Addresses = toMachineAddresses(vmstatus.Addresses(vmi, nodeNetwork))
		}
	}
	s.setVM(km, state)
	if vmi != nil && vmi.Status.NodeName != "" {
		km.Status.FailureDomain = sc.failureDomain()
	}
	if !state.Running {
		setBootstrap(km, metav1.ConditionFalse, infrav1.BootstrapCheckPendingReason, "waiting for the VM instance to run")
		markNotProvisioned(km)
		return ctrl.Result{}, nil
	}
	result, done := s.checkBootstrap(ctx, sc, vmi, state)
	if !done || !state.Ready {
		markNotProvisioned(km)
		return result, nil
	}
	km.Status.Ready = true
	km.Status.Initialization.Provisioned = ptr.To(true)
	if err := s.setNodeProviderID(ctx, sc); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// rootDiskCloned reports whether the VM's root DataVolume finished.
func rootDiskCloned(vm *kubevirtv1.VirtualMachine, dvs []*cdiv1.DataVolume) bool {
	name := vmbuilder.DataVolumeName(vm.Name, golden.RootDiskName)
	for _, dv := range dvs {
		if dv.Name == name {
			return dv.Status.Phase == cdiv1.Succeeded
		}
	}
	return false
}

func (sc *Scope) failureDomain() string {
	if sc.Machine != nil {
		return sc.Machine.Spec.FailureDomain
	}
	return ""
}

// create writes the user data Secret and the VM. It reports false with a
// condition set when it has to wait for something.
func (s *Service) create(ctx context.Context, sc *Scope, key types.NamespacedName) (bool, error) {
	km := sc.KubevirtMachine
	// The import starts before bootstrap data exists: workers get theirs
	// only once the control plane is up, and the download need not wait.
	goldenVolume, ready, err := s.goldenVolume(ctx, sc)
	if err != nil || !ready {
		return false, err
	}
	data, err := s.userData(ctx, sc)
	if err != nil || data == nil {
		return false, err
	}
	if ok, err := s.cloneAuthorized(ctx, sc); err != nil || !ok {
		return false, err
	}
	in := vmbuilder.Input{
		Name: key.Name, Namespace: key.Namespace, Spec: km.Spec, KubevirtMachineNamespace: km.Namespace,
		ClusterName: sc.Cluster.Name, MachineName: sc.Machine.Name,
		MachineDeployment: sc.Machine.Labels[clusterv1.MachineDeploymentNameLabel],
		ControlPlane:      isControlPlane(sc.Machine), FailureDomain: sc.Machine.Spec.FailureDomain,
		UserDataSecret: sc.UserDataSecretName(), Format: data.format, HasNetworkData: data.networkData != nil,
		GoldenVolume: goldenVolume,
	}
	if sc.KubevirtCluster != nil {
		kc := sc.KubevirtCluster
		in.FailureDomainSelector = failuredomains.Selector(kc.Spec.FailureDomains, in.FailureDomain)
		in.ClusterNetworks = tenantnet.ClusterNetworks(kc, sc.Infra.Namespace)
		in.DNSPolicy, in.DNSConfig = kc.Spec.DNSPolicy, kc.Spec.DNSConfig
	}
	if !sc.Infra.External && key.Namespace == km.Namespace {
		// An owner in another namespace counts as missing for the garbage
		// collector, which would delete the VM at once.
		in.Owner = metav1.NewControllerRef(km, infrav1.GroupVersion.WithKind("KubevirtMachine"))
	}
	vm, err := vmbuilder.Build(in)
	if err != nil {
		s.setVM(km, vmstatus.State{Reason: infrav1.VMCreateFailedReason, Warning: true, Message: err.Error()})
		return false, nil
	}
	if ok, err := s.ensureUserDataSecret(ctx, sc, data); err != nil || !ok {
		return false, err
	}
	if err := sc.Infra.Client.Create(ctx, vm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			s.setVM(km, vmstatus.State{Reason: infrav1.VMCreateFailedReason, Warning: true,
				Message: "the infra cluster refused the VirtualMachine: " + err.Error()})
			return false, nil
		}
		return false, fmt.Errorf("creating VirtualMachine %s: %w", key, err)
	}
	km.Spec.ProviderID = ptr.To(infrav1.ProviderIDPrefix + vm.Name)
	s.Recorder.Eventf(km, vm, corev1.EventTypeNormal, "VirtualMachineCreated", "CreateVirtualMachine",
		"created VirtualMachine %s on the %s", key, infraName(sc))
	s.setVM(km, vmstatus.State{Reason: infrav1.VMPendingReason, Message: "VirtualMachine created, waiting for KubeVirt"})
	setBootstrap(km, metav1.ConditionFalse, infrav1.BootstrapCheckPendingReason, "waiting for the VM instance to run")
	markNotProvisioned(km)
	return true, s.adoptUserData(ctx, sc, vm)
}

func isControlPlane(m *clusterv1.Machine) bool {
	_, ok := m.Labels[clusterv1.MachineControlPlaneLabel]
	return ok
}

func infraName(sc *Scope) string {
	if sc.Infra.External {
		return "external infra cluster " + sc.Infra.Key
	}
	return "management cluster"
}

// SetVMCondition sets VirtualMachineReady to False with reason and message,
// with an Event when the reason changes, for waits the controller itself
// finds (owner, infra cluster).
func (s *Service) SetVMCondition(km *infrav1.KubevirtMachine, reason, message string) {
	warning := reason != infrav1.WaitingForOwnerReason && reason != infrav1.DeletingReason
	s.setVM(km, vmstatus.State{Reason: reason, Message: message, Warning: warning})
}

// setVM sets the VirtualMachineReady condition, with an Event when its
// reason changes.
func (s *Service) setVM(km *infrav1.KubevirtMachine, st vmstatus.State) {
	status := metav1.ConditionFalse
	if st.Ready {
		status = metav1.ConditionTrue
	}
	prev := conditions.Get(km, infrav1.VirtualMachineReadyCondition)
	if prev == nil || prev.Reason != st.Reason {
		eventType := corev1.EventTypeNormal
		if st.Warning {
			eventType = corev1.EventTypeWarning
		}
		s.Recorder.Eventf(km, nil, eventType, "VirtualMachine"+st.Reason, "ObserveVirtualMachine", "%s", st.Message)
	}
	conditions.Set(km, metav1.Condition{Type: infrav1.VirtualMachineReadyCondition, Status: status, Reason: st.Reason, Message: st.Message})
}

func setBootstrap(km *infrav1.KubevirtMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(km, metav1.Condition{Type: infrav1.BootstrapSucceededCondition, Status: status, Reason: reason, Message: message})
}

func markNotProvisioned(km *infrav1.KubevirtMachine) {
	// Once provisioned, a machine stays provisioned for CAPI (the contract
	// does not go back); readiness is carried by the Ready condition.
	if !ptr.Deref(km.Status.Initialization.Provisioned, false) {
		km.Status.Ready = false
	}
}

func toMachineAddresses(in []vmstatus.Address) []clusterv1.MachineAddress {
	out := make([]clusterv1.MachineAddress, 0, len(in))
	for _, a := range in {
		out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineAddressType(a.Type), Address: a.Address})
	}
	return out
}

// get reads an object, reporting NotFound as found=false.
func get(ctx context.Context, r client.Reader, key types.NamespacedName, obj client.Object) (bool, error) {
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

// recheck is the wait before checking again what no event announces: an
// SSH bootstrap check, a clone permission.
func (s *Service) recheck() time.Duration {
	if s.RecheckAfter > 0 {
		return s.RecheckAfter
	}
	return 10 * time.Second
}
