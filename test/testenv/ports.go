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
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// reservedPorts is how many ports below the kernel's ephemeral range
// FreePort hands out from.
const reservedPorts = 8000

var (
	portsMu sync.Mutex
	// portLocks keeps every reservation's lock file open, and so locked,
	// until the process exits.
	portLocks = map[int]*os.File{}
)

// FreePort reserves a loopback port for a server that starts listening
// later (a webhook server, a process given --port). A port the kernel picks
// for "127.0.0.1:0" and then frees may be handed to the next listener that
// asks for any port before its server binds it: one CI run lost the Cluster
// API webhook server's port to a health probe that way. So FreePort picks
// from just below the kernel's ephemeral range, which no kernel-chosen port
// comes from, and holds a lock file per port for the life of the process,
// so parallel test processes never pick the same one.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	low := ephemeralLow() - reservedPorts
	dir := filepath.Join(os.TempDir(), "capkv-ports")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, err
	}
	start := rand.IntN(reservedPorts) //nolint:gosec // spreads processes' first picks, not a secret
	for i := range reservedPorts {
		port := low + (start+i)%reservedPorts
		if _, held := portLocks[port]; held {
			continue
		}
		f, err := lockPort(dir, port)
		if err != nil {
			return 0, err
		}
		if f == nil {
			continue
		}
		// Something outside the tests may listen there.
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) //nolint:noctx // closed at once
		if err != nil {
			_ = f.Close()
			continue
		}
		_ = l.Close()
		portLocks[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", low, low+reservedPorts-1)
}

// lockPort takes port's lock file, or returns nil if another process
// holds it.
func lockPort(dir string, port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // a lock file under the temp dir
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if fields := strings.Fields(string(data)); len(fields) == 2 {
			if low, err := strconv.Atoi(fields[0]); err == nil && low > reservedPorts+1024 {
				return low
			}
		}
	}
	return 32768
}
