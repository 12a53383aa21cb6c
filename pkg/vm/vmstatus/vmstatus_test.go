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

package vmstatus

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func dv(phase cdiv1.DataVolumePhase, progress string, conds ...cdiv1.DataVolumeCondition) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Status: cdiv1.DataVolumeStatus{Phase: phase, Progress: cdiv1.DataVolumeProgress(progress), Conditions: conds}}
}

func vmi(phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceCondition) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "m-0"},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "infra-a", Conditions: conds}}
}

// The API server's words, as virt-controller and CDI pass them on.
const (
	quotaMessage    = `failed to create virtual machine pod: pods "virt-launcher-m-0-x7k2p" is forbidden: exceeded quota: tenant-pods, requested: pods=1, used: pods=6, limited: pods=6`
	limitMessage    = `failed to create virtual machine pod: pods "virt-launcher-m-0-x7k2p" is forbidden: maximum cpu usage per Container is 2, but limit is 4`
	pvcQuotaMessage = `persistentvolumeclaims "root" is forbidden: exceeded quota: storage, requested: requests.storage=10Gi, used: requests.storage=50Gi, limited: requests.storage=55Gi`
)

func TestRefusalNamesQuota(t *testing.T) {
	r, ok := refusal(quotaMessage)
	if !ok || r.Quota != "tenant-pods" || r.Reason != infrav1.QuotaExceededReason {
		t.Fatalf("got %+v, %v", r, ok)
	}
	if strings.Contains(r.Message, "virt-launcher") {
		t.Errorf("message %q keeps the launcher pod's generated name, which changes with every retry", r.Message)
	}
	if l, ok := refusal(limitMessage); !ok || l.Message != "maximum cpu usage per Container is 2, but limit is 4" {
		t.Errorf("limit range refusal: got %+v, %v", l, ok)
	}
	if r, ok := refusal(`pods "p" is forbidden: status unknown for quota: q1, resource: pods`); !ok || r.Quota != "q1" {
		t.Fatalf("quota not yet computed: got %+v, %v", r, ok)
	}
}

func TestOf(t *testing.T) {
	ready := kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}
	notReady := kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Message: "readiness probe has not passed yet"}
	unschedulable := kubevirtv1.VirtualMachineInstanceCondition{Type: "PodScheduled", Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient memory."}
	failedVM := &kubevirtv1.VirtualMachine{Status: kubevirtv1.VirtualMachineStatus{Conditions: []kubevirtv1.VirtualMachineCondition{
		{Type: kubevirtv1.VirtualMachineFailure, Status: corev1.ConditionTrue, Message: "memory is required"}}}}
	alwaysVM := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways)}}
	crashLoopVM := &kubevirtv1.VirtualMachine{Spec: alwaysVM.Spec, Status: kubevirtv1.VirtualMachineStatus{
		PrintableStatus: kubevirtv1.VirtualMachineStatusCrashLoopBackOff,
		StartFailure:    &kubevirtv1.VirtualMachineStartFailure{ConsecutiveFailCount: 3, RetryAfterTimestamp: &metav1.Time{}}}}
	tests := []struct {
		name                string
		vm                  *kubevirtv1.VirtualMachine
		vmi                 *kubevirtv1.VirtualMachineInstance
		dvs                 []*cdiv1.DataVolume
		reason, msgContains string
		ready, running      bool
	}{
		{"importing with progress", nil, nil, []*cdiv1.DataVolume{dv(cdiv1.ImportInProgress, "45.20%")}, infrav1.DiskImportingReason, "45.20%", false, false},
		{"cloning", nil, nil, []*cdiv1.DataVolume{dv(cdiv1.CSICloneInProgress, "")}, infrav1.DiskCloningReason, "CSICloneInProgress", false, false},
		{"failed disk carries CDI's message", nil, nil, []*cdiv1.DataVolume{dv(cdiv1.Failed, "", cdiv1.DataVolumeCondition{
			Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Message: "Unable to connect to http data source"})}, infrav1.DiskFailedReason, "Unable to connect", false, false},
		{"wffc disk does not block", nil, nil, []*cdiv1.DataVolume{dv(cdiv1.WaitForFirstConsumer, "")}, infrav1.PendingReason, "waiting for KubeVirt", false, false},
		{"KubeVirt refuses to start", failedVM, nil, nil, infrav1.StartFailedReason, "memory is required", false, false},
		{"unschedulable carries the scheduler's message", nil, vmi(kubevirtv1.Scheduling, unschedulable), nil, infrav1.UnschedulableReason, "Insufficient memory", false, false},
		{"scheduled is booting", nil, vmi(kubevirtv1.Scheduled), nil, infrav1.BootingReason, "infra-a", false, false},
		{"running not ready", nil, vmi(kubevirtv1.Running, notReady), nil, infrav1.BootingReason, "readiness probe", false, true},
		{"running and ready", nil, vmi(kubevirtv1.Running, ready), nil, infrav1.ReadyReason, "infra-a", true, true},
		{"failed instance", nil, vmi(kubevirtv1.Failed), nil, infrav1.StoppedReason, "failed", false, false},
		{"failed instance of an Always VM restarts", alwaysVM, vmi(kubevirtv1.Failed), nil, infrav1.RestartingReason, "starts a new one", false, false},
		{"stopped instance of an Always VM restarts", alwaysVM, vmi(kubevirtv1.Succeeded), nil, infrav1.RestartingReason, "succeeded", false, false},
		{"crash loop says when KubeVirt retries", crashLoopVM, nil, nil, infrav1.CrashLoopBackOffReason, "failed 3 times", false, false},
		{"launcher pod refused by a quota names it", nil, vmi(kubevirtv1.Pending, kubevirtv1.VirtualMachineInstanceCondition{
			Type: "Synchronized", Status: corev1.ConditionFalse, Reason: "FailedCreate", Message: quotaMessage}), nil,
			infrav1.QuotaExceededReason, "ResourceQuota tenant-pods of the infra namespace", false, false},
		{"launcher pod refused by a limit range", nil, vmi(kubevirtv1.Pending, kubevirtv1.VirtualMachineInstanceCondition{
			Type: "Synchronized", Status: corev1.ConditionFalse, Reason: "FailedCreate", Message: limitMessage}), nil,
			infrav1.LimitRangeViolatedReason, "maximum cpu usage per Container is 2", false, false},
		{"other launcher failures stay pending", nil, vmi(kubevirtv1.Pending, kubevirtv1.VirtualMachineInstanceCondition{
			Type: "Synchronized", Status: corev1.ConditionFalse, Reason: "FailedCreate", Message: "failed to create virtual machine pod: etcdserver: timeout"}), nil,
			infrav1.PendingReason, "etcdserver: timeout", false, false},
		{"disk claim refused by a quota", nil, nil, []*cdiv1.DataVolume{dv(cdiv1.Pending, "", cdiv1.DataVolumeCondition{
			Type: cdiv1.DataVolumeBound, Status: corev1.ConditionFalse, Reason: "ErrExceededQuota", Message: pvcQuotaMessage})},
			infrav1.QuotaExceededReason, "claim of DataVolume root refused by ResourceQuota storage", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := tt.vm
			if vm == nil {
				vm = &kubevirtv1.VirtualMachine{}
			}
			s := Of(vm, tt.vmi, tt.dvs)
			if s.Reason != tt.reason || s.Ready != tt.ready || s.Running != tt.running || !strings.Contains(s.Message, tt.msgContains) {
				t.Errorf("got %+v, want reason %s ready %v running %v message containing %q", s, tt.reason, tt.ready, tt.running, tt.msgContains)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	v := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "m-0"},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Networks: []kubevirtv1.Network{
			{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
			{Name: "tenant", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "vlan10"}}},
		}},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", IP: "10.244.0.5", IPs: []string{"10.244.0.5", "fd00::5"}},
			{Name: "tenant", IP: "192.168.10.7", IPs: []string{"192.168.10.7"}},
		}},
	}
	str := func(as []Address) string {
		var parts []string
		for _, a := range as {
			parts = append(parts, a.Type+"="+a.Address)
		}
		return strings.Join(parts, ",")
	}
	if got, want := str(Addresses(v, NodeNetwork(v, ""))), "InternalIP=10.244.0.5,InternalIP=fd00::5,InternalIP=192.168.10.7,Hostname=m-0,InternalDNS=m-0"; got != want {
		t.Errorf("pod network first: got %s, want %s", got, want)
	}
	if got, want := str(Addresses(v, NodeNetwork(v, "tenant"))), "InternalIP=192.168.10.7,InternalIP=10.244.0.5,InternalIP=fd00::5,Hostname=m-0,InternalDNS=m-0"; got != want {
		t.Errorf("configured network first: got %s, want %s", got, want)
	}
	v.Status.Interfaces[1].IP, v.Status.Interfaces[1].IPs = "", nil
	if HasNodeAddress(v, "tenant") || !HasNodeAddress(v, "default") {
		t.Error("HasNodeAddress wrong")
	}
}

func TestRestartable(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec kubevirtv1.VirtualMachineSpec
		want bool
	}{
		{"Always", kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways)}, true},
		{"RerunOnFailure", kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyRerunOnFailure)}, false},
		{"Manual", kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyManual)}, false},
		{"running true", kubevirtv1.VirtualMachineSpec{Running: ptr.To(true)}, true},
		{"neither", kubevirtv1.VirtualMachineSpec{}, false},
	} {
		if got := Restartable(&kubevirtv1.VirtualMachine{Spec: tt.spec}); got != tt.want {
			t.Errorf("%s: Restartable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMigration(t *testing.T) {
	at := func(m *kubevirtv1.VirtualMachineInstanceMigrationState) *kubevirtv1.VirtualMachineInstance {
		v := vmi(kubevirtv1.Running)
		v.Status.MigrationState = m
		return v
	}
	for _, tt := range []struct {
		name           string
		vmi            *kubevirtv1.VirtualMachineInstance
		ok             bool
		status         metav1.ConditionStatus
		reason, substr string
	}{
		{"never migrated", vmi(kubevirtv1.Running), false, "", "", ""},
		{"running", at(&kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: "infra-a", TargetNode: "infra-b"}),
			true, metav1.ConditionTrue, infrav1.MigrationRunningReason, "from infra-a to infra-b"},
		{"succeeded", at(&kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: "infra-a", TargetNode: "infra-b", Completed: true}),
			true, metav1.ConditionFalse, infrav1.MigrationSucceededReason, "from infra-a to infra-b"},
		{"failed carries the reason", at(&kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: "infra-a", TargetNode: "infra-b", Failed: true, FailureReason: "target pod unschedulable"}),
			true, metav1.ConditionFalse, infrav1.MigrationFailedReason, "target pod unschedulable"},
	} {
		c, ok := Migration(tt.vmi)
		if ok != tt.ok || c.Status != tt.status || c.Reason != tt.reason || !strings.Contains(c.Message, tt.substr) {
			t.Errorf("%s: got %v %+v", tt.name, ok, c)
		}
	}
}

func TestLiveMigratable(t *testing.T) {
	if _, ok := LiveMigratable(vmi(kubevirtv1.Running)); ok {
		t.Error("no condition reported yet must not be read as one")
	}
	c, ok := LiveMigratable(vmi(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable,
		Status: corev1.ConditionFalse, Reason: kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable, Message: "cannot migrate VMI which does not use masquerade"}))
	if !ok || c.Status != metav1.ConditionFalse || c.Reason != kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable || !strings.Contains(c.Message, "masquerade") {
		t.Errorf("got %v %+v", ok, c)
	}
	c, _ = LiveMigratable(vmi(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}))
	if c.Status != metav1.ConditionTrue || c.Reason == "" {
		t.Errorf("a True condition without a reason gets one: %+v", c)
	}
}
