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

// Command calibrate measures how fast this machine does the work the test
// suite's processes do, so that timings from different machines can be
// compared (docs/testing.md, "Machine speed"). It decodes, copies and
// encodes a fixed JSON document, as an API server does a custom resource,
// on one processor, and prints the CPU seconds that took: the same work on
// every machine and every commit, so the number depends on the machine
// (and the Go version) alone.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// rounds is how often the document is decoded, copied and encoded in a
// batch: about 2 CPU seconds on the machines of 2026-12.
const rounds = 100

// batches is how many batches run; the fastest counts, since another
// process can only slow a batch down.
const batches = 5

func main() {
	runtime.GOMAXPROCS(1)
	doc := document()
	fastest := time.Duration(0)
	for range batches {
		if took := batch(doc); fastest == 0 || took < fastest {
			fastest = took
		}
	}
	// In the unit of the first calibrations: 400 rounds.
	fmt.Printf("%.1f\n", 4*fastest.Seconds())
}

// batch decodes, copies and encodes doc rounds times and returns the CPU
// time that took.
func batch(doc []byte) time.Duration {
	before := cpu()
	size := 0
	for range rounds {
		var obj map[string]any
		if err := json.Unmarshal(doc, &obj); err != nil {
			fail(err)
		}
		out, err := json.Marshal(k8sruntime.DeepCopyJSON(obj))
		if err != nil {
			fail(err)
		}
		size += len(out)
	}
	took := cpu() - before
	if size != rounds*len(doc) {
		fail(fmt.Errorf("the document changed in a round trip: %d bytes, not %d", size, rounds*len(doc)))
	}
	return took
}

// document is a fixed list of objects shaped like a VirtualMachine's spec,
// with keys already in the order encoding/json writes them.
func document() []byte {
	items := make([]any, 0, 300)
	for i := range 300 {
		disks := make([]any, 0, 8)
		for d := range 8 {
			disks = append(disks, map[string]any{
				"bootOrder": d + 1, "disk": map[string]any{"bus": "virtio"}, "name": fmt.Sprintf("disk-%d-%d", i, d),
			})
		}
		items = append(items, map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": map[string]any{
				"annotations": map[string]any{"example.com/note": "a fixed workload for timing", "example.com/index": fmt.Sprint(i)},
				"labels":      map[string]any{"cluster.x-k8s.io/cluster-name": "calibration", "example.com/machine": fmt.Sprintf("m-%03d", i)},
				"name":        fmt.Sprintf("vm-%03d", i), "namespace": "calibration",
			},
			"spec": map[string]any{
				"runStrategy": "Always",
				"template": map[string]any{"spec": map[string]any{
					"domain": map[string]any{
						"cpu": map[string]any{"cores": 2, "sockets": 1, "threads": 1}, "devices": map[string]any{"disks": disks},
						"memory": map[string]any{"guest": "4Gi"},
					},
					"evictionStrategy": "LiveMigrate", "terminationGracePeriodSeconds": 30,
				}},
			},
		})
	}
	doc, err := json.Marshal(map[string]any{"apiVersion": "v1", "items": items, "kind": "List"})
	if err != nil {
		fail(err)
	}
	return doc
}

// cpu is the user and system time this process has used.
func cpu() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		fail(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "calibrate:", err)
	os.Exit(1)
}
