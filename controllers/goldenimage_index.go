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

package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine"
)

// GoldenImageIndex indexes KubevirtMachines, KubevirtMachineTemplates,
// KubevirtMachinePools and KubevirtClusters by the golden volume in their
// status, "<infra Secret>|<namespace>/<name>".
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

// ClonedFromTemplateIndex indexes KubevirtMachines by the
// KubevirtMachineTemplate Cluster API cloned them from (its name, in the
// machine's namespace).
const ClonedFromTemplateIndex = "metadata.annotations.clonedFromKubevirtMachineTemplate"

// IndexGoldenImages registers GoldenImageIndex and ClonedFromTemplateIndex
// with the manager; call it once, before setting up the controllers.
func IndexGoldenImages(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtMachine{}, ClonedFromTemplateIndex, func(o client.Object) []string {
		if name := machine.ClonedFromTemplate(o); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtMachine{}, GoldenImageIndex, func(o client.Object) []string {
		return goldenIndexOf(o.(*infrav1.KubevirtMachine).Status.GoldenImage)
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtMachineTemplate{}, GoldenImageIndex, func(o client.Object) []string {
		return goldenIndexOf(o.(*infrav1.KubevirtMachineTemplate).Status.GoldenImage)
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtMachinePool{}, GoldenImageIndex, func(o client.Object) []string {
		return goldenIndexOf(o.(*infrav1.KubevirtMachinePool).Status.GoldenImage)
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &infrav1.KubevirtCluster{}, GoldenImageIndex, func(o client.Object) []string {
		return goldenIndexOf(o.(*infrav1.KubevirtCluster).Status.GoldenImage)
	})
}
