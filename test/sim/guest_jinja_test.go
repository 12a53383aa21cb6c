package sim

import "testing"

func TestJinjaCloudConfig(t *testing.T) {
	good := "## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    name: {{ ds.meta_data.local_hostname }}\nruncmd:\n- kubeadm init\n"
	if err := validateUserData(&Bootstrap{Format: "cloud-config", Data: []byte(good)}); err != nil {
		t.Errorf("CABPK-style Jinja cloud-config refused: %v", err)
	}
	bad := "## template: jinja\n#cloud-config\nruncmd: [unclosed\n"
	if err := validateUserData(&Bootstrap{Format: "cloud-config", Data: []byte(bad)}); err == nil {
		t.Error("a Jinja template rendering invalid YAML was accepted")
	}
}
