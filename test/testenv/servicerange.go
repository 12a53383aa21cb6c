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

package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Every environment's Services get ClusterIPs on loopback, 127.X.0.0/17
// with X from firstServiceOctet, and the pods the test world runs for real
// (the provider's) get IPs from 127.X.128.0/17: all of 127.0.0.0/8 is loopback on Linux, so
// the test world can serve a ClusterIP as kube-proxy would (the provider's
// webhook Service, a tenant's ClusterIP control-plane endpoint) without
// sending a packet to a private network. 127.1.x.y is the simulated load
// balancer's.
const (
	firstServiceOctet = 16
	lastServiceOctet  = 250
)

// serviceRange is a Service ClusterIP range held by this process: the lock
// file keeps other test processes on this machine (go test runs packages in
// parallel) from taking the same range while it is open.
type serviceRange struct {
	cidr, podCIDR string
	lock          *os.File
}

// claimServiceRange takes the first free loopback range, or the one
// recorded in stateFile when that is set and exists (an environment
// restarted on kept etcd data must keep its Services' ClusterIPs).
func claimServiceRange(stateFile string) (*serviceRange, error) {
	if stateFile != "" {
		if data, err := os.ReadFile(stateFile); err == nil { //nolint:gosec // the caller's state directory
			var octet int
			if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "127.%d.0.0/17", &octet); err != nil {
				return nil, fmt.Errorf("reading the Service range of kept state %s: %w", stateFile, err)
			}
			r, ok, err := tryServiceRange(octet)
			if err != nil || !ok {
				return nil, errors.Join(err, fmt.Errorf("the Service range %s of kept state is held by another process", r.cidr))
			}
			return r, nil
		}
	}
	for octet := firstServiceOctet; octet <= lastServiceOctet; octet++ {
		r, ok, err := tryServiceRange(octet)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if stateFile != "" {
			if err := os.WriteFile(stateFile, []byte(r.cidr+"\n"), 0o600); err != nil {
				return nil, errors.Join(err, r.release())
			}
		}
		return r, nil
	}
	return nil, fmt.Errorf("every loopback Service range 127.%d-%d.0.0/17 is held by another process", firstServiceOctet, lastServiceOctet)
}

func tryServiceRange(octet int) (*serviceRange, bool, error) {
	r := &serviceRange{cidr: fmt.Sprintf("127.%d.0.0/17", octet), podCIDR: fmt.Sprintf("127.%d.128.0/17", octet)}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("capkv-service-range-127.%d.lock", octet))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // a lock file of our own
	if err != nil {
		return r, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return r, false, nil
		}
		return r, false, err
	}
	r.lock = f
	return r, true, nil
}

// release lets another environment take the range.
func (r *serviceRange) release() error {
	if r == nil || r.lock == nil {
		return nil
	}
	return r.lock.Close()
}

// NodeAddress is the loopback InternalIP of the environment's i-th node,
// 127.X.255.(10+i), above its pod range's addresses in use.
func (e *Env) NodeAddress(i int) string {
	var octet int
	if _, err := fmt.Sscanf(e.PodCIDR, "127.%d.128.0/17", &octet); err != nil {
		return ""
	}
	return fmt.Sprintf("127.%d.255.%d", octet, 10+i)
}
