package cpservice

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Ensure creates the control-plane Service or corrects its drift, and
// returns the live Service; nil when the cluster wants none. Objects of
// the same name without the owner annotation are never taken over.
func Ensure(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, clusterName, ns string, owner *metav1.OwnerReference) (*corev1.Service, error) {
	if !Wanted(kc) {
		return nil, nil
	}
	want := Desired(kc, clusterName, ns)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[infrav1.OwnerAnnotation] = kc.Namespace + "/" + kc.Name
	live := &corev1.Service{}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		if owner != nil && want.Namespace == kc.Namespace {
			want.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if err := c.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("creating control-plane Service %s/%s: %w", want.Namespace, want.Name, err)
		}
		return want, nil
	}
	if err != nil {
		return nil, err
	}
	if live.Annotations[infrav1.OwnerAnnotation] != want.Annotations[infrav1.OwnerAnnotation] {
		return nil, fmt.Errorf("a Service %s/%s exists but was not created for this KubevirtCluster; rename or remove it", live.Namespace, live.Name)
	}
	if !Drifted(live, want) {
		return live, nil
	}
	Apply(live, want)
	if err := c.Update(ctx, live); err != nil {
		return nil, fmt.Errorf("correcting drift of control-plane Service %s/%s: %w", live.Namespace, live.Name, err)
	}
	return live, nil
}

// Delete deletes the control-plane Service if it is this cluster's, and
// reports whether it is gone.
func Delete(ctx context.Context, c client.Client, kc *infrav1.KubevirtCluster, ns string) (bool, error) {
	want := Desired(kc, "", ns)
	live := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if live.Annotations[infrav1.OwnerAnnotation] != kc.Namespace+"/"+kc.Name {
		return true, nil
	}
	if live.DeletionTimestamp.IsZero() {
		if err := c.Delete(ctx, live, client.Preconditions{UID: &live.UID}); client.IgnoreNotFound(err) != nil {
			return false, err
		}
	}
	return false, nil
}
