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
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// bootstrapSentinel is the file Cluster API bootstrap providers write once
// bootstrap succeeded. It is spelled out here rather than taken from the
// provider, so that the provider is checked against Cluster API's
// convention instead of against itself.
const bootstrapSentinel = "/run/cluster-api/bootstrap-success.complete"

// maxUserDataDepth bounds nested MIME parts and merged Ignition configs.
const maxUserDataDepth = 8

// guestSSH holds the sshd of every booted guest whose user data gave it a
// host key. Its zero value is ready to use.
type guestSSH struct {
	mu      sync.Mutex
	closed  bool
	servers map[types.NamespacedName]*guestServer
	routes  map[string]*guestServer // by VM address, "ip:22"
}

// guestServer is one guest's sshd, listening on a loopback port.
type guestServer struct {
	uid    types.UID
	ln     net.Listener
	config *ssh.ServerConfig
	files  guestFiles
	mapped bool // whether routes holds the VMI's addresses; guarded by guestSSH.mu

	mu    sync.Mutex
	done  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startSSH starts the guest's sshd if its user data carries a host key. It
// is idempotent for one VMI, and replaces the server of an earlier VMI of
// the same name, since a restarted VM is a new VMI and a new boot.
// Reconciles of one VMI never run concurrently, so check-then-start is safe.
func (s *Simulator) startSSH(vmi *kubevirtv1.VirtualMachineInstance, data *Bootstrap, outcome string) {
	key := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	g := &s.guests
	g.mu.Lock()
	old := g.servers[key]
	if old != nil && old.uid == vmi.UID {
		g.route(old, vmi)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	s.stopSSH(key)
	var creds guestCredentials
	if data != nil {
		creds = readCredentials(data)
	}
	if creds.hostKey == nil {
		return
	}
	srv, err := newGuestServer(vmi.UID, creds, filesOf(data, outcome))
	if err != nil {
		s.log.Error(err, "starting simulated guest sshd", "vmi", key)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		srv.stop()
		return
	}
	if g.servers == nil {
		g.servers, g.routes = map[types.NamespacedName]*guestServer{}, map[string]*guestServer{}
	}
	g.servers[key] = srv
	g.route(srv, vmi)
}

// route maps the VMI's addresses on port 22 to srv; the caller holds g.mu.
// A later VMI reusing an address takes it over, as the network would.
func (g *guestSSH) route(srv *guestServer, vmi *kubevirtv1.VirtualMachineInstance) {
	for _, iface := range vmi.Status.Interfaces {
		for _, ip := range append([]string{iface.IP}, iface.IPs...) {
			if parsed := net.ParseIP(ip); parsed != nil {
				g.routes[net.JoinHostPort(parsed.String(), "22")] = srv
				srv.mapped = true
			}
		}
	}
}

// stopSSH stops the VMI's sshd: its guest has shut down or the VMI is gone.
func (s *Simulator) stopSSH(key types.NamespacedName) {
	g := &s.guests
	g.mu.Lock()
	srv := g.servers[key]
	delete(g.servers, key)
	for addr, routed := range g.routes {
		if routed == srv {
			delete(g.routes, addr)
		}
	}
	g.mu.Unlock()
	if srv != nil {
		srv.stop()
	}
}

// stopAllSSH stops every guest's sshd, and any that would start later.
func (s *Simulator) stopAllSSH() {
	g := &s.guests
	g.mu.Lock()
	g.closed = true
	servers := g.servers
	g.servers, g.routes = nil, nil
	g.mu.Unlock()
	for _, srv := range servers {
		srv.stop()
	}
}

// DialGuest dials a simulated guest's SSH server by the VM address the
// provider sees, from Provider; addresses of no guest are refused, like an
// unreachable network, and connections the NetworkPolicies refuse are
// dropped (Connect).
func (s *Simulator) DialGuest(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !strings.HasPrefix(network, "tcp") {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("simulated guests are reached by TCP to ip:port, not %s %q", network, addr)}
	}
	target := net.JoinHostPort(ip.String(), port)
	srv := s.guests.lookup(target)
	if srv == nil && s.mapLateAddresses(ctx) {
		srv = s.guests.lookup(target)
	}
	portNum, _ := strconv.ParseUint(port, 10, 16)
	if srv == nil {
		// Failing at once, rather than stalling like a dropped packet,
		// keeps tests fast; the provider must retry either way.
		return nil, &net.OpError{Op: "dial", Net: network, Addr: &net.TCPAddr{IP: ip, Port: int(portNum)},
			Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}
	}
	// The guest is there; whether the connection reaches it is the
	// NetworkPolicies' call.
	if err := s.Connect(ctx, s.Provider, AddressEndpoint(ip.String()), "TCP", int32(portNum)); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", srv.ln.Addr().String())
}

func (g *guestSSH) lookup(addr string) *guestServer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.routes[addr]
}

// mapLateAddresses maps the servers whose VMI had no IPs yet when its guest
// booted, reading those VMIs again; it reports whether it mapped any.
func (s *Simulator) mapLateAddresses(ctx context.Context) bool {
	g := &s.guests
	g.mu.Lock()
	var pending []types.NamespacedName
	for key, srv := range g.servers {
		if !srv.mapped && s.client != nil {
			pending = append(pending, key)
		}
	}
	g.mu.Unlock()
	mapped := false
	for _, key := range pending {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if s.client.Get(ctx, key, vmi) != nil {
			continue
		}
		g.mu.Lock()
		// The server may have been replaced while the lock was released.
		if srv := g.servers[key]; srv != nil && srv.uid == vmi.UID {
			g.route(srv, vmi)
			mapped = mapped || srv.mapped
		}
		g.mu.Unlock()
	}
	return mapped
}

func newGuestServer(uid types.UID, creds guestCredentials, files guestFiles) (*guestServer, error) {
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if creds.authorized[md.User()][string(key.Marshal())] {
				return nil, nil
			}
			return nil, errors.New("key not authorized for user")
		},
	}
	config.AddHostKey(creds.hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &guestServer{uid: uid, ln: ln, config: config, files: files, conns: map[net.Conn]bool{}}
	srv.wg.Add(1)
	go srv.accept()
	return srv, nil
}

func (srv *guestServer) accept() {
	defer srv.wg.Done()
	for {
		conn, err := srv.ln.Accept()
		if err != nil {
			return
		}
		srv.mu.Lock()
		if srv.done {
			srv.mu.Unlock()
			_ = conn.Close()
			return
		}
		srv.conns[conn] = true
		srv.wg.Add(1)
		srv.mu.Unlock()
		go srv.serve(conn)
	}
}

// stop closes the listener and every connection, and waits for the
// goroutines that served them.
func (srv *guestServer) stop() {
	srv.mu.Lock()
	srv.done = true
	_ = srv.ln.Close()
	for conn := range srv.conns {
		_ = conn.Close()
	}
	srv.mu.Unlock()
	srv.wg.Wait()
}

func (srv *guestServer) serve(conn net.Conn) {
	defer srv.wg.Done()
	defer func() {
		_ = conn.Close()
		srv.mu.Lock()
		delete(srv.conns, conn)
		srv.mu.Unlock()
	}()
	// Like sshd's LoginGraceTime: a client that never finishes the
	// handshake does not hold the connection forever.
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	_, chans, reqs, err := ssh.NewServerConn(conn, srv.config)
	if err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{})
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.Prohibited, "only sessions are supported")
			continue
		}
		if ch, chReqs, err := nc.Accept(); err == nil {
			srv.wg.Add(1)
			go srv.session(ch, chReqs)
		}
	}
}

// session runs one command in the guest (runInGuest), as sshd would with
// a shell; the guest has no other programs, shells or terminals.
func (srv *guestServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer srv.wg.Done()
	defer ch.Close()
	ran := false
	// Requests are drained until the client closes its side too, so that
	// unanswered ones cannot stall the connection.
	for req := range reqs {
		var exec struct{ Command string }
		if ran || req.Type != "exec" || ssh.Unmarshal(req.Payload, &exec) != nil {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		status, stderr := runInGuest(shellWords(exec.Command), srv.files)
		_, _ = fmt.Fprint(ch.Stderr(), stderr)
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		ran = true // one command per session, as with sshd
		_ = ch.Close()
	}
}
