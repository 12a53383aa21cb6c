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
	"encoding/binary"
	"fmt"
	"net"
	"sync"
)

// ipAllocator hands out addresses: pod IPs from one CIDR, and for each
// Multus network a /24 of another.
type ipAllocator struct {
	mu       sync.Mutex
	pod      *net.IPNet
	multus   *net.IPNet
	next     map[string]uint32
	networks map[string]uint32
	// taken are pod IPs that launcher pods of an earlier simulator hold
	// (the world restarted from kept state).
	taken  map[string]bool
	seeded bool
}

func newIPAllocator(podCIDR, multusCIDR string) *ipAllocator {
	_, pod, err := net.ParseCIDR(podCIDR)
	if err != nil {
		panic(fmt.Sprintf("sim: bad pod CIDR %q: %v", podCIDR, err))
	}
	_, multus, err := net.ParseCIDR(multusCIDR)
	if err != nil {
		panic(fmt.Sprintf("sim: bad Multus CIDR %q: %v", multusCIDR, err))
	}
	return &ipAllocator{pod: pod, multus: multus, next: map[string]uint32{}, networks: map[string]uint32{}}
}

func (a *ipAllocator) podIP() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if ip := a.allocate("pod", a.pod, 0); !a.taken[ip] {
			return ip
		}
	}
}

// seed marks the pod IPs of launcher pods that exist, once.
func (a *ipAllocator) seed(list func() ([]string, error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seeded {
		return nil
	}
	ips, err := list()
	if err != nil {
		return err
	}
	a.taken = map[string]bool{}
	for _, ip := range ips {
		a.taken[ip] = true
	}
	a.seeded = true
	return nil
}

// networkIP allocates in the /24 of a Multus network (namespace/name).
func (a *ipAllocator) networkIP(network string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx, ok := a.networks[network]
	if !ok {
		idx = uint32(len(a.networks)) + 1
		a.networks[network] = idx
	}
	return a.allocate(network, a.multus, idx<<8)
}

func (a *ipAllocator) allocate(key string, cidr *net.IPNet, offset uint32) string {
	a.next[key]++
	base := binary.BigEndian.Uint32(cidr.IP.To4())
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, base+offset+1+a.next[key])
	return ip.String()
}

// reserved is an address of the pod CIDR that podIP reaches only after
// handing out all others: its last but one. Processes standing in for pods
// use it.
func (a *ipAllocator) reserved() string {
	ones, bits := a.pod.Mask.Size()
	last := binary.BigEndian.Uint32(a.pod.IP.To4()) | (1<<(bits-ones) - 1)
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, last-1)
	return ip.String()
}
