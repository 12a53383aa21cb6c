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

package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/golden"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vmbuilder"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
)

// TestRootDiskClonedWhileWaitingForBootstrapData: a machine without
// bootstrap data has its root disk cloned by CDI meanwhile, says so, and
// creates no VM; once the data comes, the VM uses that very DataVolume
// (one clone, same UID). A machine deleted while it waits leaves nothing.
func TestRootDiskClonedWhileWaitingForBootstrapData(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTenantCluster(t, nil)
	before := counters()
	late := tc.newMachine(t, fixture.MachineOptions{Name: "early-0", NoBootstrap: true, Mutate: withImage(imageA, "")})
	gone := tc.newMachine(t, fixture.MachineOptions{Name: "early-1", NoBootstrap: true, Mutate: withImage(imageA, "")})
	rootDisk := func(km *infrav1.KubevirtMachine) func() (*cdiv1.DataVolume, error) {
		return func() (*cdiv1.DataVolume, error) {
			dv := &cdiv1.DataVolume{}
			return dv, infraGet(t, w.Env.Client, tc.ns, vmbuilder.DataVolumeName(km.Name, golden.RootDiskName), dv)
		}
	}
	for _, km := range []*infrav1.KubevirtMachine{late, gone} {
		eventually(t, func() cdiv1.DataVolumePhase {
			dv, err := rootDisk(km)()
			if err != nil {
				return cdiv1.DataVolumePhase(err.Error())
			}
			return dv.Status.Phase
		}).Should(Equal(cdiv1.Succeeded))
		eventually(t, func() string { return condition(get(t, tc.c, km), infrav1.VirtualMachineReadyCondition) }).Should(And(
			HavePrefix("False/"+infrav1.WaitingForBootstrapDataReason), ContainSubstring("meanwhile CDI clones the root disk into DataVolume")))
		g.Expect(apierrors.IsNotFound(infraGet(t, w.Env.Client, tc.ns, km.Name, &kubevirtv1.VirtualMachine{}))).To(BeTrue(), "no VM without bootstrap data")
		dv, err := rootDisk(km)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dv.OwnerReferences).To(ConsistOf(HaveField("UID", get(t, tc.c, km).UID)), "the machine owns its early disk")
	}
	g.Expect(delta(before, sim.Clones)).To(BeEquivalentTo(2))
	early, err := rootDisk(late)()
	g.Expect(err).NotTo(HaveOccurred())

	tc.giveBootstrapData(t, late.Name)
	eventually(t, tc.provisioned(late)).Should(Succeed())
	used, err := rootDisk(late)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(used.UID).To(Equal(early.UID), "the VM uses the DataVolume cloned early")
	g.Expect(delta(before, sim.Clones)).To(BeEquivalentTo(2), "no second clone")

	g.Expect(w.Env.Client.Delete(ctx, get(t, tc.c, gone))).To(Succeed())
	eventually(t, func() bool { _, err := rootDisk(gone)(); return apierrors.IsNotFound(err) }).Should(BeTrue(), "the early disk goes with its machine")
	g.Expect(w.Env.Client.Delete(ctx, get(t, tc.c, late))).To(Succeed())
	eventually(t, func() bool { _, err := rootDisk(late)(); return apierrors.IsNotFound(err) }).Should(BeTrue())
}
