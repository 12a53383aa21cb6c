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

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// processUsage reads a process's CPU seconds (user and system) and its peak
// resident memory from /proc.
func processUsage(pid int) (cpuSeconds float64, peakRSSBytes int64, err error) {
	_, _, cpuSeconds, err = readStat(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			peakRSSBytes = kb * 1024
		}
	}
	return cpuSeconds, peakRSSBytes, nil
}

// readStat reads a process's command name, parent and CPU seconds (user
// and system) from its /proc stat file.
func readStat(path string) (name string, ppid int, cpuSeconds float64, err error) {
	stat, err := os.ReadFile(path) //nolint:gosec // a process's stat under /proc
	if err != nil {
		return "", 0, 0, err
	}
	s := string(stat)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	// After the name: state, ppid, ..., utime and stime (the 14th and 15th
	// fields overall), in clock ticks of 1/100 s.
	var fields []string
	if open >= 0 && closing > open {
		fields = strings.Fields(s[closing+1:])
	}
	if len(fields) < 13 {
		return "", 0, 0, fmt.Errorf("unexpected %s", path)
	}
	ppid, _ = strconv.Atoi(fields[1])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return s[open+1 : closing], ppid, (utime + stime) / 100, nil
}

// cpuByProcess sums the CPU seconds (user and system) of the process self
// and every process below it, by command name, from procRoot (/proc): the
// world's API server, etcd, KubeVirt's and CDI's controllers, the provider,
// and this process, which runs Cluster API, the simulator and the oracle.
func cpuByProcess(procRoot string, self int) (map[string]float64, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	type proc struct {
		name    string
		seconds float64
	}
	procs := map[int]proc{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, ppid, seconds, err := readStat(filepath.Join(procRoot, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		procs[pid] = proc{name: name, seconds: seconds}
		children[ppid] = append(children[ppid], pid)
	}
	out := map[string]float64{}
	for queue := []int{self}; len(queue) > 0; queue = queue[1:] {
		p, ok := procs[queue[0]]
		if !ok {
			continue
		}
		out[p.name] += p.seconds
		queue = append(queue, children[queue[0]]...)
	}
	return out, nil
}

// cpuSince is the CPU seconds each process spent since before, rounded to
// a tenth; a process started since counts from zero.
func cpuSince(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, s := range after {
		out[name] = math.Round((s-before[name])*10) / 10
	}
	return out
}

// whileMeasuring runs measure and returns the CPU seconds each process of
// the world spent meanwhile (cpuByProcess).
func whileMeasuring(measure func() error) (map[string]float64, error) {
	before, err := cpuByProcess("/proc", os.Getpid())
	if err != nil {
		return nil, err
	}
	if err := measure(); err != nil {
		return nil, err
	}
	after, err := cpuByProcess("/proc", os.Getpid())
	if err != nil {
		return nil, err
	}
	return cpuSince(before, after), nil
}
