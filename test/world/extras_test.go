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

package world_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// echoBackend routes every load balancer port to one TCP server that greets
// with a fixed line.
type echoBackend struct{ addr string }

func (e echoBackend) Backend(context.Context, *corev1.Service, corev1.ServicePort) (string, bool) {
	return e.addr, true
}

// TestLoadBalancerGivesEachServiceItsOwnAddress checks a LoadBalancer Service
// gets a loopback ingress address whose port forwards to the backend.
func TestLoadBalancerGivesEachServiceItsOwnAddress(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, "hello from the backend\n")
			_ = conn.Close()
		}
	}()
	w.Sim.LBBackend = echoBackend{addr: l.Addr().String()}
	defer func() { w.Sim.LBBackend = nil }()

	ns := namespace(t)
	ingress := func(name string) func() string {
		return func() string {
			svc := &corev1.Service{}
			if err := w.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
				return ""
			}
			return svc.Status.LoadBalancer.Ingress[0].IP
		}
	}
	for _, name := range []string{"api-a", "api-b"} {
		g.Expect(w.Env.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Port: 6443, Protocol: corev1.ProtocolTCP}}},
		})).To(Succeed())
	}
	g.Eventually(ingress("api-a"), 30*time.Second).Should(HavePrefix("127."))
	g.Eventually(ingress("api-b"), 30*time.Second).Should(HavePrefix("127."))
	g.Expect(ingress("api-a")()).NotTo(Equal(ingress("api-b")()))

	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ingress("api-a")(), "6443"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	line, err := bufio.NewReader(conn).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("hello from the backend\n"))
}

// TestMultusNetworks checks a VM on a secondary network needs its
// NetworkAttachmentDefinition, and gets an address on it once it exists
// where its guest runs DHCP there: its network config says so; without
// any, cloud-init configures the first interface only.
func TestMultusNetworks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	onStorage := func(networkData string) func(v *kubevirtv1.VirtualMachine) {
		return func(v *kubevirtv1.VirtualMachine) {
			spec := &v.Spec.Template.Spec
			spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork(),
				{Name: "storage", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "storage-vlan"}}}}
			spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultBridgeNetworkInterface(),
				{Name: "storage", MacAddress: "02:aa:00:00:00:42", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}}
			if networkData != "" {
				spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{
					CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n", NetworkData: networkData}}})
				spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "cloudinit"})
			}
		}
	}
	v := vm(ns, "multus", onStorage("version: 2\nethernets:\n  storage:\n    match: {macaddress: \"02:aa:00:00:00:42\"}\n    dhcp4: true\n"))
	bare := vm(ns, "multus-unconfigured", onStorage(""))
	g.Expect(w.Env.Client.Create(ctx, v)).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, bare)).To(Succeed())
	g.Consistently(vmiOf(g, v), 2*time.Second).ShouldNot(phase(kubevirtv1.Running), "started without its network")

	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(ns)
	nad.SetName("storage-vlan")
	g.Expect(unstructured.SetNestedField(nad.Object, `{"cniVersion":"0.3.1","type":"bridge","bridge":"br-storage","vlan":42}`, "spec", "config")).To(Succeed())
	g.Expect(w.Env.Client.Create(ctx, nad)).To(Succeed())
	for _, vm := range []*kubevirtv1.VirtualMachine{v, bare} {
		g.Eventually(vmiOf(g, vm), 30*time.Second).Should(phase(kubevirtv1.Running))
		ifaces := vmiOf(g, vm)().Status.Interfaces
		g.Expect(ifaces).To(HaveLen(2))
		g.Expect(ifaces[0].Name).To(Equal("default"), "the pod network comes first")
		g.Expect(ifaces[0].IP).NotTo(BeEmpty())
		g.Expect(ifaces[1].Name).To(Equal("storage"))
	}
	g.Expect(vmiOf(g, v)().Status.Interfaces[1].IP).To(HavePrefix("192.168."), "DHCP on the storage interface")
	g.Expect(vmiOf(g, bare)().Status.Interfaces[1].IP).To(BeEmpty(), "cloud-init's fallback configured only the first interface")
}

// TestSimulatorMetrics checks the counters are served for Prometheus, each
// from the start.
func TestSimulatorMetrics(t *testing.T) {
	g := NewWithT(t)
	g.Eventually(func() string {
		resp, err := http.Get(w.SimMetricsURL)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}, 10*time.Second).Should(ContainSubstring(`capkv_sim_events_total{event="guest_boot_failures"}`))
}
