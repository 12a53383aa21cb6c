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

package world

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

// A container that ends shows how it ended in its log and in the runner's
// report, also when a signal killed it and it wrote nothing itself.
func TestContainerExitShowsInLogs(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{name: "exit code", script: "echo started; exit 3", want: "exit status 3"},
		{name: "killed", script: "echo started; kill -9 $$", want: "signal: killed"},
		{name: "clean exit", script: "echo started", want: "exit status 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			p, err := startProcess(&launch{path: "/bin/sh", args: []string{"-c", tc.script}, dir: dir}, func() {})
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(p.done).WithTimeout(10 * time.Second).Should(BeTrue())
			g.Expect(p.log.Close()).To(Succeed())
			want := fmt.Sprintf("world: container exited (pid %d): %s", p.cmd.Process.Pid, tc.want)
			g.Expect(p.state()).To(Equal(strings.TrimPrefix(want, "world: container ")))
			data, err := os.ReadFile(filepath.Join(dir, "container.log"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).To(Equal("started\n" + want + "\n"))
		})
	}
}

// The report of a failed spec holds every pod, in name order, each with its
// restarts, its container's state and the tail of its log.
func TestLogTailsPerPod(t *testing.T) {
	g := NewWithT(t)
	r := &PodRunner{pods: map[types.NamespacedName]*container{}}
	for _, name := range []string{"b", "a"} {
		dir := t.TempDir()
		p, err := startProcess(&launch{path: "/bin/sh", args: []string{"-c", "for i in 1 2 3 4; do echo " + name + "$i; done; sleep 30"}, dir: dir}, func() {})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = p.stop(time.Second) })
		r.pods[types.NamespacedName{Namespace: "ns", Name: name}] = &container{dir: dir, proc: p, restarts: 2}
		g.Eventually(func() (string, error) {
			data, err := os.ReadFile(filepath.Join(dir, "container.log"))
			return string(data), err
		}).Should(HaveSuffix(name + "4\n"))
	}
	tails := r.LogTails(2)
	g.Expect(strings.Split(tails, "\n")).To(HaveExactElements(
		MatchRegexp(`^== pod ns/a \(restarts 2, container running \(pid \d+\), started .*\)$`),
		Equal("[2 lines before]"), Equal("a3"), Equal("a4"),
		MatchRegexp(`^== pod ns/b \(restarts 2, container running \(pid \d+\), started .*\)$`),
		Equal("[2 lines before]"), Equal("b3"), Equal("b4"),
		Equal(""),
	))
	g.Expect(r.Logs()).To(ContainSubstring("a1\na2\na3\na4\n== pod ns/b"))
}
