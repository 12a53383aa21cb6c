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
	"strings"
)

// guestFiles are the files a booted guest holds that its commands can see:
// those its user data wrote (cloud-init's write_files, Ignition's
// storage.files), and, once it joined its cluster, the bootstrap sentinel
// and the kubelet's kubeconfig and configuration kubeadm writes.
type guestFiles map[string]bool

// filesOf are the files of a guest booted with data to outcome. User data
// the guest could not parse wrote nothing; the sentinel is written by the
// bootstrap's last command, after kubeadm succeeded.
func filesOf(data *Bootstrap, outcome string) guestFiles {
	files := guestFiles{}
	if data != nil && validateUserData(data) == nil {
		for path := range writtenFiles(data) {
			files[path] = true
		}
	}
	if outcome == "joined" {
		files[bootstrapSentinel] = true
		// What kubeadm writes on every node it joins or initializes.
		for _, path := range []string{"/etc/kubernetes/kubelet.conf", "/var/lib/kubelet/config.yaml"} {
			files[path] = true
		}
	}
	return files
}

// runInGuest is the exit status of a command run in the simulated guest,
// and what it prints on stderr. The guest has these programs alone
// (docs/simulator.md#commands-in-the-guest); anything else is not found,
// with a shell's status 127:
//
//	test -f|-e PATH, [ -f|-e PATH ]  0 if the guest holds PATH, else 1
//	cat PATH                         0 if the guest holds PATH, else 1
//	true                             0
//	false                            1
func runInGuest(argv []string, files guestFiles) (uint32, string) {
	if len(argv) == 0 {
		return 127, "sh: : not found\n"
	}
	args := argv
	if args[0] == "[" && args[len(args)-1] == "]" {
		args = append([]string{"test"}, args[1:len(args)-1]...)
	}
	exists := func(path string) uint32 {
		if files[path] {
			return 0
		}
		return 1
	}
	switch {
	case args[0] == "true" && len(args) == 1:
		return 0, ""
	case args[0] == "false" && len(args) == 1:
		return 1, ""
	case args[0] == "test" && len(args) == 3 && (args[1] == "-f" || args[1] == "-e"):
		return exists(args[2]), ""
	case args[0] == "cat" && len(args) == 2:
		if exists(args[1]) != 0 {
			return 1, "cat: " + args[1] + ": No such file or directory\n"
		}
		return 0, ""
	}
	return 127, "sh: " + args[0] + ": not found\n"
}

// shellWords splits an ssh session's command line as a shell would for the
// table's commands: at blanks, each word's quotes removed. A probe's argv
// reaches the guest agent already split and is taken as it is.
func shellWords(line string) []string {
	words := strings.Fields(line)
	for i, w := range words {
		words[i] = strings.Trim(w, `'"`)
	}
	return words
}

// probeCommand is the command an exec probe runs in the guest: the VMI's
// own, or, once virt-controller wrapped it for the launcher pod (which
// shows in the VMI too), the one virt-probe hands the guest agent:
// --command's value and the arguments after "--" (KubeVirt v1.7.0
// pkg/virt-controller/services/rendercontainer.go,
// wrapExecProbeWithVirtProbe).
func probeCommand(argv []string) []string {
	if len(argv) == 0 || argv[0] != "virt-probe" {
		return argv
	}
	var cmd []string
	for i := 1; i < len(argv); i++ {
		switch argv[i] {
		case "--command":
			if i+1 < len(argv) {
				cmd = []string{argv[i+1]}
				i++
			}
		case "--":
			if cmd == nil {
				return nil
			}
			return append(cmd, argv[i+1:]...)
		}
	}
	return cmd
}
