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

package sim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

const healthCloudConfig = `#cloud-config
write_files:
- path: /etc/health/ok
  content: "yes"
`

func TestRunInGuest(t *testing.T) {
	joined := filesOf(&Bootstrap{Format: "cloud-config", Data: []byte(healthCloudConfig)}, "joined")
	booted := filesOf(&Bootstrap{Format: "cloud-config", Data: []byte(healthCloudConfig)}, "booted")
	for name, tc := range map[string]struct {
		argv  []string
		files guestFiles
		want  uint32
	}{
		"the sentinel of a joined guest":                {[]string{"test", "-f", bootstrapSentinel}, joined, 0},
		"no sentinel before it joined":                  {[]string{"test", "-f", bootstrapSentinel}, booted, 1},
		"a probe's argv keeps its quotes, as exec does": {[]string{"test", "-f", "'" + bootstrapSentinel + "'"}, joined, 1},
		"kubeadm's kubelet.conf once joined":            {[]string{"test", "-f", "/etc/kubernetes/kubelet.conf"}, joined, 0},
		"no kubelet.conf before":                        {[]string{"test", "-f", "/etc/kubernetes/kubelet.conf"}, booted, 1},
		"a file its user data wrote":                    {[]string{"cat", "/etc/health/ok"}, booted, 0},
		"a file nothing wrote":                          {[]string{"test", "-e", "/etc/health/missing"}, joined, 1},
		"the bracket form":                              {[]string{"[", "-f", "/etc/health/ok", "]"}, booted, 0},
		"true":                                          {[]string{"true"}, nil, 0},
		"false":                                         {[]string{"false"}, nil, 1},
		"a shell, which the guest cannot run":           {[]string{"/bin/sh", "-c", "true"}, joined, 127},
		"a program the table does not hold":             {[]string{"systemctl", "is-active", "kubelet"}, joined, 127},
		"no command":                                    {nil, joined, 127},
		"test with a flag the table does not know":      {[]string{"test", "-d", "/etc"}, joined, 127},
	} {
		t.Run(name, func(t *testing.T) {
			if got, _ := runInGuest(tc.argv, tc.files); got != tc.want {
				t.Errorf("runInGuest(%q) = %d, want %d", tc.argv, got, tc.want)
			}
		})
	}
}

func TestAnswersProbe(t *testing.T) {
	probe := func(p *kubevirtv1.Probe) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{ReadinessProbe: p}}
	}
	exec := func(cmd ...string) *kubevirtv1.Probe {
		return &kubevirtv1.Probe{Handler: kubevirtv1.Handler{Exec: &corev1.ExecAction{Command: cmd}}}
	}
	joined := guestFiles{bootstrapSentinel: true}
	for name, tc := range map[string]struct {
		vmi   *kubevirtv1.VirtualMachineInstance
		agent bool
		want  bool
	}{
		"no probe":                             {probe(nil), true, false},
		"a guest agent ping":                   {probe(&kubevirtv1.Probe{Handler: kubevirtv1.Handler{GuestAgentPing: &kubevirtv1.GuestAgentPing{}}}), true, true},
		"a ping without an agent":              {probe(&kubevirtv1.Probe{Handler: kubevirtv1.Handler{GuestAgentPing: &kubevirtv1.GuestAgentPing{}}}), false, false},
		"the sentinel check of a joined guest": {probe(exec("test", "-f", bootstrapSentinel)), true, true},
		"an exec probe without an agent":       {probe(exec("test", "-f", bootstrapSentinel)), false, false},
		"a command the guest fails":            {probe(exec("test", "-f", "/nowhere")), true, false},
		"a command the guest lacks":            {probe(exec("curl", "-f", "http://localhost:10248/healthz")), true, false},
		"as virt-controller wraps it": {probe(exec("virt-probe", "--domainName", "ns_vm", "--timeoutSeconds", "5",
			"--command", "test", "--", "-f", bootstrapSentinel)), true, true},
		"a wrapped command the guest fails": {probe(exec("virt-probe", "--domainName", "ns_vm", "--timeoutSeconds", "5",
			"--command", "test", "--", "-f", "/nowhere")), true, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := answersProbe(tc.vmi, tc.agent, joined); got != tc.want {
				t.Errorf("answersProbe = %v, want %v", got, tc.want)
			}
		})
	}
}
