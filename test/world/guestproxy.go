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
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// guestProxy is a SOCKS5 server (RFC 1928, CONNECT without authentication
// only) that plays the network between the provider's pods and the
// simulated guests: the pods share the host's network, where the guests'
// addresses lead nowhere, so they reach a guest's sshd through this proxy,
// as a management cluster may reach tenant networks through a gateway.
type guestProxy struct {
	ln   net.Listener
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	ctx  context.Context
	wg   sync.WaitGroup
}

// startGuestProxy listens on loopback and dials guests with dial.
func startGuestProxy(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*guestProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &guestProxy{ln: ln, dial: dial, ctx: ctx}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *guestProxy) Addr() string { return p.ln.Addr().String() }

// Stop closes the listener and waits for the accept loop; open tunnels end
// when either side closes.
func (p *guestProxy) Stop() {
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *guestProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.tunnel(conn)
	}
}

// connectTimeout is how long Linux tries a TCP connect by default.
const connectTimeout = 127 * time.Second

// SOCKS5 reply codes.
const (
	socksSucceeded       = 0x00
	socksHostUnreachable = 0x04
	socksNotSupported    = 0x07
)

func (p *guestProxy) tunnel(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	// A client that stalls in the handshake does not hold a goroutine.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	target, err := readConnect(conn)
	if err != nil {
		_ = reply(conn, socksNotSupported)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	// A connection the network drops waits as long as Linux's connect
	// does (tcp_syn_retries 6: 127 s), though its client gives up sooner.
	ctx, cancel := context.WithTimeout(p.ctx, connectTimeout)
	guest, err := p.dial(ctx, "tcp", target)
	cancel()
	if err != nil {
		_ = reply(conn, socksHostUnreachable)
		return
	}
	defer func() { _ = guest.Close() }()
	if reply(conn, socksSucceeded) != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(guest, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, guest); done <- struct{}{} }()
	<-done
}

// readConnect reads the client's greeting (answering "no authentication")
// and its CONNECT request, and returns the target host:port.
func readConnect(conn net.Conn) (string, error) {
	head := make([]byte, 2)
	if _, err := io.ReadFull(conn, head); err != nil || head[0] != 5 {
		return "", errors.New("not SOCKS5")
	}
	if _, err := io.ReadFull(conn, make([]byte, head[1])); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte{5, 0}); err != nil {
		return "", err
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(conn, req); err != nil || req[1] != 1 {
		return "", errors.New("only CONNECT is supported")
	}
	var host string
	switch req[3] {
	case 1, 4:
		ip := make(net.IP, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(conn, ip); err != nil {
			return "", err
		}
		host = ip.String()
	case 3:
		n := make([]byte, 1)
		if _, err := io.ReadFull(conn, n); err != nil {
			return "", err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(conn, name); err != nil {
			return "", err
		}
		host = string(name)
	default:
		return "", errors.New("unknown address type")
	}
	port := make([]byte, 2)
	if _, err := io.ReadFull(conn, port); err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port)))), nil
}

// reply answers a request with a code and an empty IPv4 bound address.
func reply(conn net.Conn, code byte) error {
	_, err := conn.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
	return err
}
