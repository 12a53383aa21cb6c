package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cpservice"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/isolation"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/owned"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/tenantnet"
)

// Delete deletes what was created for the cluster: the control-plane
// Service, the NetworkPolicies, the per-cluster network and the SSH key
// Secret the provider generated. Objects that do not carry the cluster's
// owner annotation are left alone. It reports what it still waits for; ""
// means everything is gone.
func (s *Service) Delete(ctx context.Context, kc *infrav1.KubevirtCluster, infra *infracluster.Infra) (string, error) {
	gone, err := cpservice.Delete(ctx, infra.Client, kc, infra.Namespace)
	if err != nil || !gone {
		return "the control-plane Service", err
	}
	if gone, err := isolation.Delete(ctx, infra.Client, kc, infra.Namespace); err != nil || !gone {
		return "the NetworkPolicies", err
	}
	// The recorded network, and the one the spec names in case the status
	// update after creating it was lost.
	nads := []string{kc.Status.Network.PerCluster}
	if kc.Spec.Network.PerCluster != nil {
		nads = append(nads, infra.Namespace+"/"+tenantnet.Name(kc))
	}
	for _, nad := range nads {
		if nad == "" {
			continue
		}
		if gone, err := tenantnet.Delete(ctx, infra.Client, kc, nad); err != nil || !gone {
			return "NetworkAttachmentDefinition " + nad, err
		}
	}
	kc.Status.Network = infrav1.ClusterNetworkStatus{}
	if clusterName := kc.Labels[infrav1.ClusterNameLabel]; clusterName != "" {
		key := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Spec.SSHKeys.SecretName(clusterName)}
		if gone, err := owned.Delete(ctx, s.Client, &corev1.Secret{}, key, owned.Key(kc)); err != nil || !gone {
			if err != nil {
				err = fmt.Errorf("deleting SSH key Secret %s: %w", key, err)
			}
			return "SSH key Secret " + key.String(), err
		}
	}
	return "", nil
}
