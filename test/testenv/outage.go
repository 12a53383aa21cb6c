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
	"fmt"
	"io"
	"net"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// OutageProxy is a TCP proxy in front of an API server that a test can cut
// and restore: cut, it drops every open connection and refuses new ones,
// as an API server that was stopped does; restored, it listens again on
// the same address, as the API server does once started again.
type OutageProxy struct {
	target, addr string

	mu    sync.Mutex
	l     net.Listener
	conns map[net.Conn]struct{}
}

// NewOutageProxy proxies a free loopback port to target (host:port).
func NewOutageProxy(target string) (*OutageProxy, error) {
	p := &OutageProxy{target: target, conns: map[net.Conn]struct{}{}}
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // a listener for the test's lifetime
	if err != nil {
		return nil, err
	}
	p.addr = l.Addr().String()
	p.serve(l)
	return p, nil
}

// Kubeconfig is kubeconfig with its clusters' server pointed at the proxy;
// the API server's certificate is valid for 127.0.0.1 either way.
func (p *OutageProxy) Kubeconfig(kubeconfig []byte) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + p.addr
	}
	return clientcmd.Write(*cfg)
}

// Cut drops every connection and stops listening.
func (p *OutageProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		_ = p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the proxy's address.
func (p *OutageProxy) Restore() error {
	l, err := net.Listen("tcp", p.addr) //nolint:noctx // a listener for the test's lifetime
	if err != nil {
		return fmt.Errorf("listening on %s again: %w", p.addr, err)
	}
	p.serve(l)
	return nil
}

// Close ends the proxy.
func (p *OutageProxy) Close() { p.Cut() }

func (p *OutageProxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *OutageProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target) //nolint:noctx // lives as long as the proxied connection
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.l == nil {
		p.mu.Unlock()
		_, _ = c.Close(), up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	// A copy ends with an error when the proxy cuts the connection,
	// which is its point.
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_, _ = c.Close(), up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
