package machine

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmstatus"
)

// GoldenImageOf is the status entry naming the golden volume of a root disk
// in an infra cluster and namespace.
func GoldenImageOf(infraSecret types.NamespacedName, ns string, rd *infrav1.RootDiskSpec) *infrav1.GoldenImageStatus {
	s := &infrav1.GoldenImageStatus{Namespace: ns, Name: golden.Name(rd)}
	if infraSecret.Name != "" {
		s.InfraCluster = infraSecret.String()
	}
	return s
}

// goldenVolume makes sure the golden volume of the machine's root disk
// exists, and returns it once its import succeeded. Until then the
// VirtualMachineReady condition carries CDI's progress or error, and no VM
// is created: a VM whose disk cannot be made would only fail later.
func (s *Service) goldenVolume(ctx context.Context, sc *Scope) (*types.NamespacedName, bool, error) {
	km := sc.KubevirtMachine
	rd := km.Spec.RootDisk
	if !golden.Needed(rd) {
		return nil, true, nil
	}
	want := golden.DataVolume(rd, sc.VMNamespace())
	key := client.ObjectKeyFromObject(want)
	if ref := GoldenImageOf(sc.Infra.Secret, key.Namespace, rd); !equality.Semantic.DeepEqual(km.Status.GoldenImage, ref) {
		// Become a user of the golden volume, saved, before touching it: the
		// golden image controller counts users from status.
		km.Status.GoldenImage = ref
		s.setVM(km, vmstatus.State{Reason: infrav1.WaitingForGoldenImageReason,
			Message: fmt.Sprintf("using golden volume %s for %s", key, golden.Describe(&rd.Image))})
		return nil, false, nil
	}
	dv := &cdiv1.DataVolume{}
	found, err := get(ctx, sc.Infra.Client, key, dv)
	if err != nil {
		return nil, false, err
	}
	if !found {
		if err := sc.Infra.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				s.setVM(km, vmstatus.State{Reason: infrav1.GoldenImageFailedReason, Warning: true,
					Message: fmt.Sprintf("the infra cluster refused golden volume %s: %v", key, err)})
				return nil, false, nil
			}
			return nil, false, fmt.Errorf("creating golden volume %s: %w", key, err)
		}
		s.Recorder.Eventf(km, nil, corev1.EventTypeNormal, "GoldenImageCreated", "ImportGoldenImage",
			"importing %s once into golden volume %s", golden.Describe(&rd.Image), key)
		s.setVM(km, vmstatus.State{Reason: infrav1.WaitingForGoldenImageReason,
			Message: fmt.Sprintf("importing %s into golden volume %s", golden.Describe(&rd.Image), key)})
		return nil, false, nil
	}
	if dv.Labels[golden.Label] != "true" {
		s.setVM(km, vmstatus.State{Reason: infrav1.VMConflictReason, Warning: true, Message: fmt.Sprintf(
			"DataVolume %s exists but is not a golden volume of the provider", key)})
		return nil, false, nil
	}
	if !dv.DeletionTimestamp.IsZero() {
		s.setVM(km, vmstatus.State{Reason: infrav1.WaitingForGoldenImageReason,
			Message: fmt.Sprintf("golden volume %s is being deleted; it will be imported again", key)})
		return nil, false, nil
	}
	if size := golden.Size(dv); size.Cmp(rd.DiskSize) > 0 {
		s.setVM(km, vmstatus.State{Reason: infrav1.GoldenImageFailedReason, Warning: true, Message: fmt.Sprintf(
			"golden volume %s is %s, larger than this machine's diskSize %s; a clone cannot be smaller than its source: set rootDisk.imageSize on the templates sharing the image",
			key, size.String(), rd.DiskSize.String())})
		return nil, false, nil
	}
	switch dv.Status.Phase {
	case cdiv1.Succeeded:
		if _, unused := dv.Annotations[golden.UnusedSinceAnnotation]; unused {
			// Claim it back before cloning, so that the golden image
			// controller, whose delete is conditional on the version it saw,
			// cannot delete it under this clone.
			before := dv.DeepCopy()
			delete(dv.Annotations, golden.UnusedSinceAnnotation)
			if err := sc.Infra.Client.Patch(ctx, dv, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return nil, false, fmt.Errorf("claiming golden volume %s: %w", key, err)
			}
		}
		return &key, true, nil
	case cdiv1.Failed:
		s.setVM(km, vmstatus.State{Reason: infrav1.GoldenImageFailedReason, Warning: true, Message: fmt.Sprintf(
			"importing %s into golden volume %s failed: %s; delete the volume to try again", golden.Describe(&rd.Image), key, vmstatus.DataVolumeMessage(dv))})
		return nil, false, nil
	}
	st, _ := vmstatus.Disk(dv)
	if st.Message == "" {
		st.Message = "DataVolume " + dv.Name + " is " + string(dv.Status.Phase)
	}
	s.setVM(km, vmstatus.State{Reason: infrav1.WaitingForGoldenImageReason, Warning: st.Warning,
		Message: fmt.Sprintf("waiting for golden image %s: %s", golden.Describe(&rd.Image), st.Message)})
	return nil, false, nil
}

// cloneAuthorized checks, for a root disk cloned from an admin-provided PVC
// or DataSource in another namespace, that the VM's service account may
// clone from there. KubeVirt checks the same when it creates the VM's
// DataVolume, but only says so in an Event on the VM (FACTS A3); checking
// first gives the machine a clear condition instead of a silent wait.
func (s *Service) cloneAuthorized(ctx context.Context, sc *Scope) (bool, error) {
	rd := sc.KubevirtMachine.Spec.RootDisk
	if rd == nil {
		return true, nil
	}
	var srcNS string
	switch {
	case rd.Image.PVC != nil:
		srcNS = rd.Image.PVC.Namespace
	case rd.Image.DataSource != nil:
		srcNS = rd.Image.DataSource.Namespace
	}
	vmNS := sc.VMNamespace()
	if srcNS == "" || srcNS == vmNS {
		return true, nil
	}
	sa := serviceAccountOf(sc.KubevirtMachine)
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + vmNS + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + vmNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: srcNS, Verb: "create", Group: cdiv1.SchemeGroupVersion.Group, Resource: "datavolumes", Subresource: "source",
		},
	}}
	if err := sc.Infra.Client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("checking clone permission in namespace %s: %w", srcNS, err)
	}
	if review.Status.Allowed {
		return true, nil
	}
	s.setVM(sc.KubevirtMachine, vmstatus.State{Reason: infrav1.CloneNotAuthorizedReason, Warning: true, Message: fmt.Sprintf(
		"service account %s/%s may not clone %s: grant it create on datavolumes/source (group cdi.kubevirt.io) in namespace %s",
		vmNS, sa, golden.Describe(&rd.Image), srcNS)})
	return false, nil
}

// serviceAccountOf is the service account KubeVirt checks clone permission
// for: the VM's serviceAccount volume, else "default".
func serviceAccountOf(km *infrav1.KubevirtMachine) string {
	if t := km.Spec.VirtualMachineTemplate.Spec.Template; t != nil {
		for _, v := range t.Spec.Volumes {
			if v.ServiceAccount != nil && v.ServiceAccount.ServiceAccountName != "" {
				return v.ServiceAccount.ServiceAccountName
			}
		}
	}
	return "default"
}

// ensureGoldenVolume re-creates the golden volume of a machine whose VM
// exists but whose root disk has not been cloned yet, in case it was
// deleted meanwhile; otherwise the clone would wait for its source forever.
func (s *Service) ensureGoldenVolume(ctx context.Context, sc *Scope) error {
	rd := sc.KubevirtMachine.Spec.RootDisk
	want := golden.DataVolume(rd, sc.VMNamespace())
	found, err := get(ctx, sc.Infra.Client, client.ObjectKeyFromObject(want), &cdiv1.DataVolume{})
	if err != nil || found {
		return err
	}
	if err := sc.Infra.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("re-creating golden volume %s: %w", client.ObjectKeyFromObject(want), err)
	}
	s.Recorder.Eventf(sc.KubevirtMachine, nil, corev1.EventTypeNormal, "GoldenImageCreated", "ImportGoldenImage",
		"golden volume %s was gone before this machine's root disk was cloned; importing %s again", client.ObjectKeyFromObject(want), golden.Describe(&rd.Image))
	return nil
}
