package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// GoldenImageIndex indexes KubevirtMachines and KubevirtMachineTemplates by
// the golden volume in their status, "<infra Secret>|<namespace>/<name>".
const GoldenImageIndex = "status.goldenImage"

func goldenIndexValue(infraSecret types.NamespacedName, ns, name string) string {
	infra := ""
	if infraSecret.Name != "" {
		infra = infraSecret.String()
	}
	return infra + "|" + ns + "/" + name
}

func goldenIndexOf(s *infrav1.GoldenImageStatus) []string {
	if s == nil || s.Name == "" {
		return nil
	}
	return []string{s.InfraCluster + "|" + s.Namespace + "/" + s.Name}
}

// IndexGoldenImages registers GoldenImageIndex with the manager; call it
// once, before setting up the controllers.
func IndexGoldenImages(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtMachine{}, GoldenImageIndex, func(o client.Object) []string {
		return goldenIndexOf(o.(*infrav1.KubevirtMachine).Status.GoldenImage)
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtMachineTemplate{}, GoldenImageIndex, func(o client.Object) []string {
		return goldenIndexOf(o.(*infrav1.KubevirtMachineTemplate).Status.GoldenImage)
	})
}
