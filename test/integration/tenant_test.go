package integration

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// validCloudConfig is bootstrap data the simulated guest accepts.
const validCloudConfig = "#cloud-config\nruncmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n"

// tenantCluster is a Cluster with its KubevirtCluster in its own namespace,
// owned the way Cluster API owns them.
type tenantCluster struct {
	// c reaches the management cluster of the world the tenant lives in.
	c       client.Client
	ns      string
	cluster *clusterv1.Cluster
	kc      *infrav1.KubevirtCluster
}

func newTenantCluster(t *testing.T, mutate func(*infrav1.KubevirtCluster)) *tenantCluster {
	t.Helper()
	return newTenantClusterOn(t, w.Env.Client, mutate)
}

// newTenantClusterOn creates the tenant through the management client c.
func newTenantClusterOn(t *testing.T, c client.Client, mutate func(*infrav1.KubevirtCluster)) *tenantCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	tc := &tenantCluster{
		c:  c,
		ns: ns.Name,
		cluster: &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns.Name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtCluster", Name: "tenant"}},
		},
		kc: &infrav1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns.Name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "tenant"}}},
	}
	if mutate != nil {
		mutate(tc.kc)
	}
	g.Expect(c.Create(ctx, tc.cluster)).To(Succeed())
	g.Expect(c.Create(ctx, tc.kc)).To(Succeed())
	return tc
}

// machineOptions shape one tenant machine.
type machineOptions struct {
	name         string
	controlPlane bool
	// format and data are the bootstrap data; empty data means valid
	// cloud-config.
	format, data string
	// noBootstrap leaves the Machine without bootstrap data.
	noBootstrap bool
	mutate      func(*infrav1.KubevirtMachine)
}

// newMachine creates a Machine, its bootstrap Secret and its
// KubevirtMachine, owned as Cluster API owns them.
func (tc *tenantCluster) newMachine(t *testing.T, o machineOptions) *infrav1.KubevirtMachine {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	if o.data == "" {
		o.data = validCloudConfig
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: tc.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "tenant"}},
		Spec: clusterv1.MachineSpec{ClusterName: "tenant", Version: "v1.34.1",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "KubevirtMachine", Name: o.name}},
	}
	if o.controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	if o.noBootstrap {
		// A bootstrap config that has not produced data yet.
		m.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{
			APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: o.name}
	} else {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: o.name + "-bootstrap", Namespace: tc.ns},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": []byte(o.data)}}
		if o.format != "" {
			secret.Data["format"] = []byte(o.format)
		}
		g.Expect(tc.c.Create(ctx, secret)).To(Succeed())
		m.Spec.Bootstrap.DataSecretName = ptr.To(secret.Name)
	}
	g.Expect(tc.c.Create(ctx, m)).To(Succeed())
	km := &infrav1.KubevirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: tc.ns,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: "tenant"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}},
		Spec: infrav1.KubevirtMachineSpec{VirtualMachineTemplate: infrav1.VirtualMachineTemplateSpec{Spec: smallVM()}},
	}
	if o.mutate != nil {
		o.mutate(km)
	}
	g.Expect(tc.c.Create(ctx, km)).To(Succeed())
	return km
}

// smallVM is a 1-CPU, 1Gi VM booting a container disk on the pod network.
func smallVM() kubevirtv1.VirtualMachineSpec {
	mem := resource.MustParse("1Gi")
	return kubevirtv1.VirtualMachineSpec{
		RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
		Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				CPU:     &kubevirtv1.CPU{Cores: 1},
				Memory:  &kubevirtv1.Memory{Guest: &mem},
				Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}},
			},
			Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
				ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/capk/ubuntu-2404-container-disk:v1.34.1"}}}},
		}},
	}
}

// get reads the current state of an object from the management cluster.
func get[T client.Object](t *testing.T, c client.Client, obj T) T {
	t.Helper()
	NewWithT(t).Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

// condition returns "Status/Reason: message" of a condition, for readable
// assertions.
func condition(km *infrav1.KubevirtMachine, t string) string {
	c := conditions.Get(km, t)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// reason polls the reason of a condition of a KubevirtMachine.
func (tc *tenantCluster) reason(km *infrav1.KubevirtMachine, t string) func() string {
	return func() string {
		cur := &infrav1.KubevirtMachine{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(km), cur); err != nil {
			return err.Error()
		}
		if c := conditions.Get(cur, t); c != nil {
			return c.Reason
		}
		return "<none>"
	}
}

// provisioned polls whether a KubevirtMachine is provisioned and Ready.
func (tc *tenantCluster) provisioned(km *infrav1.KubevirtMachine) func() error {
	return func() error {
		cur := &infrav1.KubevirtMachine{}
		if err := tc.c.Get(context.Background(), client.ObjectKeyFromObject(km), cur); err != nil {
			return err
		}
		if !ptr.Deref(cur.Status.Initialization.Provisioned, false) || !cur.Status.Ready || !conditions.IsTrue(cur, infrav1.ReadyCondition) {
			return fmt.Errorf("not provisioned: Ready %s; VirtualMachineReady %s; BootstrapSucceeded %s",
				condition(cur, infrav1.ReadyCondition), condition(cur, infrav1.VirtualMachineReadyCondition), condition(cur, infrav1.BootstrapSucceededCondition))
		}
		return nil
	}
}

// infraObject reads an object of the machine from the infra cluster.
func infraGet(t *testing.T, c client.Client, ns, name string, obj client.Object) error {
	t.Helper()
	return c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// guestOutcome polls what the simulated guest did with its bootstrap data.
func guestOutcome(c client.Client, ns, name string) func() string {
	return func() string {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, vmi); err != nil {
			return err.Error()
		}
		return vmi.Annotations["sim.capkv.io/guest"]
	}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// setBootstrapSecret plays the bootstrap provider: it sets the Machine's
// bootstrap data Secret.
func (tc *tenantCluster) setBootstrapSecret(t *testing.T, machine, secret string) {
	t.Helper()
	m := get(t, tc.c, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: machine, Namespace: tc.ns}})
	m.Spec.Bootstrap.DataSecretName = ptr.To(secret)
	NewWithT(t).Expect(tc.c.Update(context.Background(), m)).To(Succeed())
}
