package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// requestsByVerb reads controller-runtime's rest_client_requests_total from
// a Prometheus text endpoint and sums it by HTTP method.
func requestsByVerb(metricsURL string) (map[string]float64, error) {
	resp, err := http.Get(metricsURL) //nolint:gosec,noctx // a local URL the benchmark itself chose
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return parseRequests(resp.Body)
}

func parseRequests(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "rest_client_requests_total{"), "} ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(l, "="); ok && k == "method" {
				out[strings.Trim(v, `"`)] += n
			}
		}
	}
	return out, sc.Err()
}

// processUsage reads a process's CPU seconds (user and system) and its peak
// resident memory from /proc.
func processUsage(pid int) (cpuSeconds float64, peakRSSBytes int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields overall, in clock ticks (100 per second on Linux).
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
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
	return (utime + stime) / 100, peakRSSBytes, nil
}
