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

package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
	"github.com/capkv/cluster-api-provider-kubevirt/test/fixture"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

const watchFilterLabel = clusterv1.WatchLabel

// tenant is a Cluster with its KubevirtCluster, and one Machine with its
// KubevirtMachine, owned the way Cluster API owns them.
type tenant struct {
	cluster *clusterv1.Cluster
	kc      *infrav1.KubevirtCluster
	machine *clusterv1.Machine
	km      *infrav1.KubevirtMachine
}

func newNamespace(t *testing.T) string {
	t.Helper()
	return newNamespaceOn(t, env)
}

func newNamespaceOn(t *testing.T, e *testenv.Env) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctrl-"}}
	NewWithT(t).Expect(e.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// createTenant creates the four objects in ns on the shared environment,
// labelled for watchFilter.
func createTenant(t *testing.T, ns, watchFilter string, kcMutate func(*infrav1.KubevirtCluster), kmMutate func(*infrav1.KubevirtMachine)) *tenant {
	t.Helper()
	return createTenantOn(t, env, ns, watchFilter, kcMutate, kmMutate)
}

// createTenantOn creates a fixture tenant whose machine waits for its
// bootstrap data, so that no VM is created.
func createTenantOn(t *testing.T, env *testenv.Env, ns, watchFilter string, kcMutate func(*infrav1.KubevirtCluster), kmMutate func(*infrav1.KubevirtMachine)) *tenant {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	tn, err := fixture.NewTenant(ctx, env.Client, fixture.TenantOptions{
		Namespace: ns, Labels: map[string]string{watchFilterLabel: watchFilter}, Owned: true, Mutate: kcMutate})
	g.Expect(err).NotTo(HaveOccurred())
	m, km, err := tn.NewMachine(ctx, fixture.MachineOptions{Name: "tenant-md-0", NoBootstrap: true, Mutate: kmMutate})
	g.Expect(err).NotTo(HaveOccurred())
	return &tenant{cluster: tn.Cluster, kc: tn.KubevirtCluster, machine: m, km: km}
}

// condition reads a condition of obj from the shared API server.
func condition(obj conditions.Setter, conditionType string) func() *metav1.Condition {
	return conditionOn(env, obj, conditionType)
}

func conditionOn(env *testenv.Env, obj conditions.Setter, conditionType string) func() *metav1.Condition {
	return func() *metav1.Condition {
		o := obj.(client.Object)
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			return nil
		}
		return conditions.Get(obj, conditionType)
	}
}

func haveReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()),
		WithTransform(func(c *metav1.Condition) metav1.ConditionStatus { return c.Status }, Equal(status)),
		WithTransform(func(c *metav1.Condition) string { return c.Reason }, Equal(reason)))
}

// TestInfraClusterAvailability starts the manager on an API server without
// KubeVirt, checks that it stays healthy and reports the missing APIs on its
// objects, then installs KubeVirt and CDI and checks the report follows,
// driven by the CRD watch alone.
func TestInfraClusterAvailability(t *testing.T) {
	g := NewWithT(t)
	// An API server of its own, without KubeVirt, which the test installs.
	bare, err := testenv.Start(testenv.Options{WithoutKubeVirtCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(bare.Stop()).To(Succeed()) })
	rm := startManagerOn(t, bare, manager.Options{WatchFilterValue: "availability"})
	ns := newNamespaceOn(t, bare)
	tn := createTenantOn(t, bare, ns, "availability", nil, nil)

	for _, obj := range []conditions.Setter{tn.kc, tn.km} {
		g.Eventually(conditionOn(bare, obj, infrav1.InfraClusterAvailableCondition), 30*time.Second).
			Should(haveReason(metav1.ConditionFalse, infrav1.KubeVirtNotInstalledReason))
		g.Expect(conditions.Get(obj, infrav1.InfraClusterAvailableCondition).Message).To(ContainSubstring("kubevirt.io/v1"))
	}
	g.Eventually(conditionOn(bare, tn.km, infrav1.VirtualMachineReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.KubeVirtNotInstalledReason))
	g.Consistently(rm.Healthy, 3*time.Second, 500*time.Millisecond).Should(Succeed())

	// Without KubeVirt no VM can exist, so deleting a machine completes.
	gone := createTenantOn(t, bare, newNamespaceOn(t, bare), "availability", nil, nil)
	g.Eventually(func() []string {
		_ = bare.Client.Get(context.Background(), client.ObjectKeyFromObject(gone.km), gone.km)
		return gone.km.Finalizers
	}, 30*time.Second).Should(ContainElement(infrav1.MachineFinalizer))
	g.Expect(bare.Client.Delete(context.Background(), gone.km)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(bare.Client.Get(context.Background(), client.ObjectKeyFromObject(gone.km), gone.km))
	}, 30*time.Second).Should(BeTrue())

	events := &corev1.EventList{}
	g.Eventually(func() []string {
		_ = bare.Client.List(context.Background(), events, client.InNamespace(ns))
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.InvolvedObject.Kind+"/"+e.Reason)
		}
		return reasons
	}, 10*time.Second).Should(ContainElements("KubevirtCluster/KubeVirtNotInstalled", "KubevirtMachine/KubeVirtNotInstalled"))

	g.Expect(bare.InstallCRDsOf("kubevirt.io")).To(Succeed())
	g.Eventually(conditionOn(bare, tn.kc, infrav1.InfraClusterAvailableCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.CDINotInstalledReason))

	g.Expect(bare.InstallCRDsOf("cdi.kubevirt.io")).To(Succeed())
	for _, obj := range []conditions.Setter{tn.kc, tn.km} {
		g.Eventually(conditionOn(bare, obj, infrav1.InfraClusterAvailableCondition), 30*time.Second).
			Should(haveReason(metav1.ConditionTrue, infrav1.AvailableReason))
	}
	// The machine moved on to its next wait: its bootstrap data.
	g.Eventually(conditionOn(bare, tn.km, infrav1.VirtualMachineReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason))
	g.Expect(rm.Healthy()).To(Succeed())
}

// TestExternalInfraClusters checks infra clusters named by a kubeconfig
// Secret: reachable, unparseable (without leaking the Secret), and missing.
func TestExternalInfraClusters(t *testing.T) {
	startManager(t, manager.Options{WatchFilterValue: "external"})
	ns := newNamespace(t)
	t.Run("external infra cluster through a kubeconfig Secret", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "infra", Namespace: ns},
			Data:       map[string][]byte{infrav1.InfraClusterSecretKubeconfigKey: env.KubeConfig},
		}
		g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
		broken := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
			Data:       map[string][]byte{infrav1.InfraClusterSecretKubeconfigKey: []byte("token: s3cr3t-value\n:::")},
		}
		g.Expect(env.Client.Create(ctx, broken)).To(Succeed())

		tenantNS := newNamespace(t)
		ext := createTenant(t, tenantNS, "external", func(kc *infrav1.KubevirtCluster) {
			kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", Name: "infra", Namespace: ns}
		}, func(km *infrav1.KubevirtMachine) {
			km.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", Name: "broken", Namespace: ns}
		})
		// A Secret of another namespace is used only once an administrator
		// grants it; the grant is acted on without a wait.
		g.Eventually(condition(ext.kc, infrav1.InfraClusterAvailableCondition), 30*time.Second).
			Should(haveReason(metav1.ConditionFalse, infrav1.NotAllowedByPolicyReason))
		g.Expect(conditions.Get(ext.kc, infrav1.InfraClusterAvailableCondition).Message).To(ContainSubstring("rule infra-secret-namespace"))
		for _, name := range []string{"infra", "broken"} {
			grant := &infrav1.KubevirtClusterIdentity{ObjectMeta: metav1.ObjectMeta{GenerateName: "grant-"},
				Spec: infrav1.KubevirtClusterIdentitySpec{
					SecretRef:         &infrav1.IdentitySecretReference{Namespace: ns, Name: name},
					AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{tenantNS}},
				}}
			g.Expect(env.Client.Create(ctx, grant)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), grant) })
		}
		g.Eventually(condition(ext.kc, infrav1.InfraClusterAvailableCondition), 10*time.Second).
			Should(haveReason(metav1.ConditionTrue, infrav1.AvailableReason))
		g.Eventually(condition(ext.km, infrav1.InfraClusterAvailableCondition), 30*time.Second).
			Should(haveReason(metav1.ConditionFalse, infrav1.InfraClusterSecretInvalidReason))
		msg := conditions.Get(ext.km, infrav1.InfraClusterAvailableCondition).Message
		g.Expect(msg).To(MatchRegexp("not a (valid|usable) kubeconfig"))
		g.Expect(msg).NotTo(ContainSubstring("s3cr3t"), "the Secret's content leaked into the condition")

		missing := createTenant(t, newNamespace(t), "external", func(kc *infrav1.KubevirtCluster) {
			kc.Spec.InfraClusterSecretRef = &corev1.ObjectReference{Kind: "Secret", Name: "absent"}
		}, nil)
		g.Eventually(condition(missing.kc, infrav1.InfraClusterAvailableCondition), 30*time.Second).
			Should(haveReason(metav1.ConditionFalse, infrav1.InfraClusterSecretInvalidReason))
		g.Expect(conditions.Get(missing.kc, infrav1.InfraClusterAvailableCondition).Message).
			To(ContainSubstring("reading infra cluster Secret"))
	})
}

// TestPausedAndOwnerless checks the Paused condition follows the Cluster and
// that an object without a Cluster API owner says it waits for one.
func TestPausedAndOwnerless(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, manager.Options{WatchFilterValue: "paused"})
	ns := newNamespace(t)
	tn := createTenant(t, ns, "paused", nil, nil)

	g.Eventually(condition(tn.kc, infrav1.PausedCondition), 30*time.Second).Should(haveReason(metav1.ConditionFalse, clusterv1.NotPausedReason))
	patch := client.MergeFrom(tn.cluster.DeepCopy())
	tn.cluster.Spec.Paused = ptr.To(true)
	g.Expect(env.Client.Patch(ctx, tn.cluster, patch)).To(Succeed())
	for _, obj := range []conditions.Setter{tn.kc, tn.km} {
		g.Eventually(condition(obj, infrav1.PausedCondition), 30*time.Second).Should(haveReason(metav1.ConditionTrue, clusterv1.PausedReason))
	}

	orphan := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns,
		Labels: map[string]string{watchFilterLabel: "paused"}}}
	g.Expect(env.Client.Create(ctx, orphan)).To(Succeed())
	g.Eventually(condition(orphan, infrav1.ReadyCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.WaitingForOwnerReason))
}

// TestWatchFilterAndNamespace checks that --watch-filter and --namespace keep
// the manager away from objects that are not its own.
func TestWatchFilterAndNamespace(t *testing.T) {
	g := NewWithT(t)
	mine, other := newNamespace(t), newNamespace(t)
	// Created before the manager starts, so that the initial list of CRDs,
	// which re-checks every object, comes after them: it must skip objects
	// of another watch filter too.
	otherFilter := &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "other-filter", Namespace: mine,
		Labels: map[string]string{watchFilterLabel: "someone-else"}}}
	g.Expect(env.Client.Create(context.Background(), otherFilter)).To(Succeed())
	otherNamespace := createTenant(t, other, "scoped", nil, nil)
	startManager(t, manager.Options{WatchFilterValue: "scoped", Namespace: mine})
	inScope := createTenant(t, mine, "scoped", nil, nil)

	g.Eventually(condition(inScope.kc, infrav1.InfraClusterAvailableCondition), 30*time.Second).ShouldNot(BeNil())
	// A provisioning machine's conditions are held back for the status
	// settle time (30 s), its finalizer is written at once: it shows the
	// machine was reconciled.
	g.Eventually(func() []string {
		_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(inScope.km), inScope.km)
		return inScope.km.Finalizers
	}, 30*time.Second).Should(ContainElement(infrav1.MachineFinalizer))
	g.Consistently(func() int {
		n := 0
		for _, o := range []client.Object{otherNamespace.kc, otherNamespace.km, otherFilter} {
			_ = env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
			if toConditionsString(o) != "" || len(o.GetFinalizers()) > 0 {
				n++
			}
		}
		return n
	}, 3*time.Second, 500*time.Millisecond).Should(BeZero())
}

func toConditionsString(o client.Object) string {
	var types []string
	if s, ok := o.(conditions.Setter); ok {
		for _, c := range s.GetConditions() {
			types = append(types, c.Type)
		}
	}
	return strings.Join(types, ",")
}

// TestMachineTemplateCapacity checks status.capacity and status.nodeInfo for
// autoscaling from zero, from the VM template and from an instance type.
func TestMachineTemplateCapacity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t, manager.Options{WatchFilterValue: "capacity"})
	ns := newNamespace(t)
	labels := map[string]string{watchFilterLabel: "capacity"}
	guest := resource.MustParse("8Gi")

	fromTemplate := &infrav1.KubevirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "sized", Namespace: ns, Labels: labels},
		Spec: infrav1.KubevirtMachineTemplateSpec{Template: infrav1.KubevirtMachineTemplateResource{Spec: infrav1.KubevirtMachineSpec{
			VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: kubevirtv1.VirtualMachineSpec{
				RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
				Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Architecture: "arm64",
					Domain:       kubevirtv1.DomainSpec{CPU: &kubevirtv1.CPU{Cores: 2, Sockets: 2}, Memory: &kubevirtv1.Memory{Guest: &guest}},
				}},
			}},
		}}},
	}
	g.Expect(env.Client.Create(ctx, fromTemplate)).To(Succeed())
	g.Eventually(condition(fromTemplate, infrav1.CapacityKnownCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionTrue, infrav1.FromTemplateReason))
	// The patch helper writes conditions and the rest of status in separate
	// calls, so the capacity may land just after the condition.
	g.Eventually(cpuOf(fromTemplate), 10*time.Second).Should(BeEquivalentTo(4))
	g.Expect(fromTemplate.Status.Capacity.Memory().Equal(guest)).To(BeTrue())
	g.Expect(fromTemplate.Status.NodeInfo).To(Equal(infrav1.NodeInfo{Architecture: infrav1.ArchitectureArm64, OperatingSystem: "linux"}))

	// A template naming an instance type that does not exist yet is
	// completed when it is created: instance types are watched.
	withInstancetype := fromTemplate.DeepCopy()
	withInstancetype.ObjectMeta = metav1.ObjectMeta{Name: "typed", Namespace: ns, Labels: labels}
	vm := &withInstancetype.Spec.Template.Spec.VirtualMachineTemplate.Spec
	vm.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.large-" + ns}
	vm.Template.Spec.Domain = kubevirtv1.DomainSpec{}
	g.Expect(env.Client.Create(ctx, withInstancetype)).To(Succeed())
	g.Eventually(condition(withInstancetype, infrav1.CapacityKnownCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionFalse, infrav1.CapacityUnknownReason))
	g.Expect(conditions.Get(withInstancetype, infrav1.CapacityKnownCondition).Message).To(ContainSubstring(`"u1.large-` + ns + `" was not found`))

	g.Expect(env.Client.Create(ctx, &instancetypev1beta1.VirtualMachineClusterInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "u1.large-" + ns},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: 2},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("4Gi")},
		},
	})).To(Succeed())
	g.Eventually(condition(withInstancetype, infrav1.CapacityKnownCondition), 30*time.Second).
		Should(haveReason(metav1.ConditionTrue, infrav1.FromInstancetypeReason))
	g.Eventually(cpuOf(withInstancetype), 10*time.Second).Should(BeEquivalentTo(2))
	g.Expect(withInstancetype.Status.Capacity.Memory().String()).To(Equal("4Gi"))

	// A namespaced instance type, in the infra namespace.
	g.Expect(env.Client.Create(ctx, &instancetypev1beta1.VirtualMachineInstancetype{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: ns},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
			CPU:    instancetypev1beta1.CPUInstancetype{Guest: 1},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("1536Mi")},
		},
	})).To(Succeed())
	namespaced := withInstancetype.DeepCopy()
	namespaced.ObjectMeta = metav1.ObjectMeta{Name: "typed-namespaced", Namespace: ns, Labels: labels}
	namespaced.Status = infrav1.KubevirtMachineTemplateStatus{}
	namespaced.Spec.Template.Spec.VirtualMachineTemplate.Spec.Instancetype = &kubevirtv1.InstancetypeMatcher{Kind: "VirtualMachineInstancetype", Name: "small"}
	g.Expect(env.Client.Create(ctx, namespaced)).To(Succeed())
	g.Eventually(cpuOf(namespaced), 30*time.Second).Should(BeEquivalentTo(1))
	g.Expect(namespaced.Status.Capacity.Memory().String()).To(Equal("1536Mi"))
}

func cpuOf(t *infrav1.KubevirtMachineTemplate) func() int64 {
	return func() int64 {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(t), t); err != nil {
			return -1
		}
		return t.Status.Capacity.Cpu().Value()
	}
}
