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

package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
)

var _ = Describe("Admission", func() {
	It("refuses a KubevirtMachine with both running and runStrategy, naming the field, as a real install does", func() {
		ctx := context.Background()
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-admission-"}}
		Expect(c.Create(ctx, namespace)).To(Succeed())
		DeferCleanup(func() { Expect(c.Delete(ctx, namespace)).To(Succeed()) })

		spec := fixture.SmallVM()
		spec.Running = ptr.To(true)
		km := &infrav1.KubevirtMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "both", Namespace: namespace.Name},
			Spec:       infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: spec}},
		}
		err := c.Create(ctx, km)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.virtualMachineTemplate.spec.running"))

		spec.Running = nil
		spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyAlways)
		km.Spec.VirtualMachineTemplate.Spec = spec
		Expect(c.Create(ctx, km)).To(Succeed(), "the same machine with runStrategy alone is accepted")
	})
})
