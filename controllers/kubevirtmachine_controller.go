package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine"
)

// unreachableRetry is how long to wait before trying an unreachable infra
// cluster again; nothing announces that it is back.
const unreachableRetry = 30 * time.Second

// KubevirtMachineReconciler reconciles KubevirtMachines.
type KubevirtMachineReconciler struct {
	Client   client.Client
	Clients  *infracluster.Clients
	Recorder events.EventRecorder
	// ClusterCache reaches tenant clusters; nil skips setting the Node's
	// providerID.
	ClusterCache clustercache.ClusterCache
	// Machines does the work once the objects are fetched.
	Machines *machine.Service
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter with this value.
	WatchFilterValue string

	controller capicontroller.Controller
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=kubevirtmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Reconcile brings one KubevirtMachine towards its desired state.
func (r *KubevirtMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	km := &infrav1.KubevirtMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, km); err != nil {
		if apierrors.IsNotFound(err) {
			r.Clients.Release(machineUser(req.NamespacedName))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if filteredOut(km, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}

	machineOwner, err := util.GetOwnerMachine(ctx, r.Client, km.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting owner Machine: %w", err)
	}
	var cluster *clusterv1.Cluster
	if machineOwner != nil {
		cluster, err = util.GetClusterFromMetadata(ctx, r.Client, machineOwner.ObjectMeta)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting Cluster of Machine %s: %w", machineOwner.Name, err)
		}
	}
	if cluster != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(machineOwner), "Cluster", klog.KObj(cluster)))
		if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, km); err != nil || isPaused || requeue {
			return ctrl.Result{}, err
		}
	}
	if km.DeletionTimestamp.IsZero() && cluster != nil {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, km, infrav1.MachineFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(km, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		summarize(km)
		err := helper.Patch(ctx, km, patch.WithOwnedConditions{Conditions: []string{
			infrav1.InfraClusterAvailableCondition, infrav1.VirtualMachineReadyCondition,
			infrav1.BootstrapSucceededCondition, infrav1.ReadyCondition,
		}})
		if err != nil && rerr == nil {
			rerr = fmt.Errorf("patching KubevirtMachine: %w", err)
		}
	}()

	if !km.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, km, machineOwner, cluster)
	}
	if cluster == nil {
		r.Machines.SetVMCondition(km, infrav1.WaitingForOwnerReason,
			"waiting for a Machine to own this KubevirtMachine and for its Cluster to exist")
		return ctrl.Result{}, nil
	}
	scope, result, ok, err := r.scope(ctx, km, machineOwner, cluster)
	if err != nil || !ok {
		return result, err
	}
	if r.ClusterCache != nil {
		if err := r.watchNodes(ctx, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.Machines.Reconcile(ctx, scope)
}

// scope fetches the KubevirtCluster and the infra cluster. When the infra
// cluster cannot be used it sets the conditions and reports false.
func (r *KubevirtMachineReconciler) scope(ctx context.Context, km *infrav1.KubevirtMachine, m *clusterv1.Machine, cluster *clusterv1.Cluster) (*machine.Scope, ctrl.Result, bool, error) {
	sc := &machine.Scope{KubevirtMachine: km, Machine: m, Cluster: cluster}
	kc, err := r.kubevirtCluster(ctx, cluster)
	if err != nil {
		return nil, ctrl.Result{}, false, err
	}
	sc.KubevirtCluster = kc
	ref := km.Spec.InfraClusterSecretRef
	if ref == nil && kc != nil {
		ref = kc.Spec.InfraClusterSecretRef
	}
	infra, status, err := r.acquire(ctx, km, ref)
	if !status.Available {
		if !provisioned(km) {
			// A provisioned machine's VM keeps running while its infra
			// cluster's API is away; only InfraClusterAvailable says so.
			r.Machines.SetVMCondition(km, status.Reason, "cannot use the infra cluster: "+status.Message)
		}
		// A broken Secret or missing CRDs announce their fix through watches;
		// an unreachable or external cluster does not, and neither does a
		// Secret that could not be read for another reason.
		if err != nil && !infracluster.IsConfigError(err) || err == nil && (status.Reason == infrav1.InfraClusterUnreachableReason || infra.External) {
			return nil, ctrl.Result{RequeueAfter: unreachableRetry}, false, nil
		}
		return nil, ctrl.Result{}, false, nil
	}
	sc.Infra = infra
	return sc, ctrl.Result{}, true, nil
}

func provisioned(km *infrav1.KubevirtMachine) bool {
	return km.Status.Initialization.Provisioned != nil && *km.Status.Initialization.Provisioned
}

func (r *KubevirtMachineReconciler) kubevirtCluster(ctx context.Context, cluster *clusterv1.Cluster) (*infrav1.KubevirtCluster, error) {
	return kubevirtClusterOf(ctx, r.Client, cluster)
}

// kubevirtClusterOf reads the KubevirtCluster of a Cluster; nil when the
// Cluster's infrastructure is something else or does not exist yet.
func kubevirtClusterOf(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (*infrav1.KubevirtCluster, error) {
	infraRef := cluster.Spec.InfrastructureRef
	if infraRef.Kind != "KubevirtCluster" || infraRef.Name == "" {
		return nil, nil
	}
	kc := &infrav1.KubevirtCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: infraRef.Name}, kc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting KubevirtCluster %s: %w", infraRef.Name, err)
	}
	return kc, nil
}

// reconcileDelete removes the machine's infra objects, then the finalizer.
// An infra cluster that cannot be reached keeps the finalizer: the VM may
// still run there.
func (r *KubevirtMachineReconciler) reconcileDelete(ctx context.Context, km *infrav1.KubevirtMachine, m *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(km, infrav1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	sc := &machine.Scope{KubevirtMachine: km, Machine: m, Cluster: cluster}
	ref := km.Spec.InfraClusterSecretRef
	if ref == nil && cluster != nil {
		kc, err := r.kubevirtCluster(ctx, cluster)
		if err != nil {
			return ctrl.Result{}, err
		}
		if kc != nil {
			ref = kc.Spec.InfraClusterSecretRef
		}
	}
	infra, status, _ := r.acquire(ctx, km, ref)
	switch {
	case status.Available || status.Reason == infrav1.CDINotInstalledReason:
		// Without CDI there are no DataVolumes to wait for, but the VM may
		// exist.
		sc.Infra = infra
		done, err := r.Machines.Delete(ctx, sc, status.Available)
		if err != nil || !done {
			return ctrl.Result{}, err
		}
	case status.Reason == infrav1.KubeVirtNotInstalledReason:
		// Without KubeVirt's API no VM of this machine can exist.
	default:
		r.Machines.SetVMCondition(km, infrav1.DeletingReason, "cannot delete the VM until the infra cluster is reachable: "+status.Message)
		return ctrl.Result{RequeueAfter: unreachableRetry}, nil
	}
	r.Clients.Release(machineUser(client.ObjectKeyFromObject(km)))
	r.Recorder.Eventf(km, nil, corev1.EventTypeNormal, "Deleted", "DeleteVirtualMachine", "VirtualMachine and its objects are gone")
	controllerutil.RemoveFinalizer(km, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

// acquire takes the machine's infra cluster and reports its state in the
// InfraClusterAvailable condition; err is the reason it could not be used.
func (r *KubevirtMachineReconciler) acquire(ctx context.Context, km *infrav1.KubevirtMachine, ref *corev1.ObjectReference) (*infracluster.Infra, infracluster.APIStatus, error) {
	infra, err := r.Clients.Acquire(ctx, ref, km.Namespace, km.Spec.VirtualMachineTemplate.ObjectMeta.Namespace, machineUser(client.ObjectKeyFromObject(km)))
	status := infracluster.APIStatus{Reason: infrav1.InfraClusterUnreachableReason}
	if err != nil {
		status.Message = err.Error()
	} else {
		status = infra.Status
	}
	setInfraCondition(r.Recorder, km, status)
	return infra, status, err
}

func machineUser(key types.NamespacedName) infracluster.User {
	return infracluster.User{Kind: "KubevirtMachine", NamespacedName: key}
}

// summarize sets Ready from the other conditions, as Cluster API's summary.
// Once the machine is provisioned, an infra API outage does not make it
// unready: its VM keeps running, and a MachineHealthCheck acting on Ready
// would otherwise replace every machine at once.
func summarize(km *infrav1.KubevirtMachine) {
	var types []string
	summarized := []string{infrav1.InfraClusterAvailableCondition, infrav1.VirtualMachineReadyCondition, infrav1.BootstrapSucceededCondition}
	if provisioned(km) && km.DeletionTimestamp.IsZero() {
		summarized = summarized[1:]
	}
	for _, t := range summarized {
		if conditions.Has(km, t) {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return
	}
	if err := conditions.SetSummaryCondition(km, km, infrav1.ReadyCondition, conditions.ForConditionTypes(types)); err != nil {
		conditions.Set(km, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionUnknown,
			Reason: "SummaryFailed", Message: err.Error()})
	}
}
