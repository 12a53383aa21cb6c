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

package sshcheck

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// testServer is a minimal sshd: one user, one authorized key, and a
// "filesystem" that only answers test -f.
type testServer struct {
	t    *testing.T
	ln   net.Listener
	user string
	serverOpts

	mu     sync.Mutex
	open   map[net.Conn]bool
	closed chan struct{} // signalled each time a server-side connection ends
}

// serverOpts choose how a testServer behaves.
type serverOpts struct {
	// files exist for test -f.
	files map[string]bool
	// silent servers accept TCP and then never speak.
	silent bool
	// noShell makes every command exit 127, like a login whose shell
	// cannot run test.
	noShell bool
	// ecdsaHostKey adds an ECDSA host key, which clients prefer to
	// ed25519 by default, as sshd on a real VM has several host keys.
	ecdsaHostKey bool
}

func newTestServer(t *testing.T, host KeyPair, client KeyPair, opts serverOpts) *testServer {
	t.Helper()
	hostSigner, err := ssh.ParsePrivateKey(host.Private)
	if err != nil {
		t.Fatal(err)
	}
	authorized, _, _, _, err := ssh.ParseAuthorizedKey([]byte(client.Public))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, user: "capk", serverOpts: opts, open: map[net.Conn]bool{}, closed: make(chan struct{}, 16)}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if md.User() == s.user && string(key.Marshal()) == string(authorized.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("not authorized")
		},
	}
	if opts.ecdsaHostKey {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := ssh.NewSignerFromKey(key)
		if err != nil {
			t.Fatal(err)
		}
		config.AddHostKey(signer)
	}
	config.AddHostKey(hostSigner)
	var wg sync.WaitGroup
	// A failed test may leave client connections open; close them from
	// this side so that cleanup cannot hang.
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for c := range s.open {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.open[conn] = true
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.open, conn)
					s.mu.Unlock()
					s.closed <- struct{}{}
				}()
				s.serve(conn, config)
			}()
		}
	}()
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

// serve handles one connection until the client goes away; it only
// returns once the client closed its side.
func (s *testServer) serve(conn net.Conn, config *ssh.ServerConfig) {
	defer conn.Close()
	if s.silent {
		// Read until the client hangs up, so the test sees when it did.
		buf := make([]byte, 256)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}
	sc, chans, reqs, err := ssh.NewServerConn(conn, config)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(ch, chReqs)
	}
	_ = sc.Wait()
}

func (s *testServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(false, nil)
			continue
		}
		var cmd struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &cmd); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		status := uint32(127)
		if f := strings.Fields(cmd.Command); !s.noShell && len(f) == 3 && f[0] == "test" && f[1] == "-f" {
			status = 1
			if s.files[f[2]] {
				status = 0
			}
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

// waitAllClosed fails the test unless every server-side connection has
// ended shortly after the probe returned.
func (s *testServer) waitAllClosed() {
	s.t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		s.mu.Lock()
		open := len(s.open)
		s.mu.Unlock()
		if open == 0 {
			return
		}
		select {
		case <-s.closed:
		case <-deadline:
			s.t.Fatalf("%d connection(s) still open on the server after the probe returned", open)
		}
	}
}

// probeWithin runs probe, failing the test rather than hanging when the
// probe ignores its timeout.
func probeWithin(t *testing.T, limit time.Duration, probe func() (bool, error)) (bool, error) {
	t.Helper()
	type result struct {
		done bool
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		done, err := probe()
		ch <- result{done, err}
	}()
	select {
	case r := <-ch:
		return r.done, r.err
	case <-time.After(limit):
		t.Fatalf("probe still running after %s", limit)
		return false, nil
	}
}

func mustKeyPair(t *testing.T) KeyPair {
	t.Helper()
	kp, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func TestNewKeyPair(t *testing.T) {
	kp := mustKeyPair(t)
	block, _ := pem.Decode(kp.Private)
	if block == nil || block.Type != "OPENSSH PRIVATE KEY" {
		t.Fatalf("private key is not an OPENSSH PRIVATE KEY PEM block: %q", kp.Private)
	}
	if strings.HasSuffix(kp.Public, "\n") || !strings.HasPrefix(kp.Public, "ssh-ed25519 ") {
		t.Fatalf("public key is not a single ssh-ed25519 authorized_keys line: %q", kp.Public)
	}
	signer, err := ssh.ParsePrivateKey(kp.Private)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(kp.Public))
	if err != nil {
		t.Fatal(err)
	}
	if string(signer.PublicKey().Marshal()) != string(pub.Marshal()) {
		t.Fatal("public key does not belong to the private key")
	}
	if other := mustKeyPair(t); other.Public == kp.Public {
		t.Fatal("two key pairs are equal")
	}
}

// errAny stands for an error that wraps none of the package's sentinels.
var errAny = errors.New("any error")

func TestProbe(t *testing.T) {
	host, client, stranger := mustKeyPair(t), mustKeyPair(t), mustKeyPair(t)
	for _, tc := range []struct {
		name       string
		files      map[string]bool
		silent     bool
		noShell    bool
		ecdsa      bool
		user       string
		clientKey  KeyPair
		hostKey    string
		want       bool
		wantErr    error  // nil: no error expected
		errMention string // the error must say this
	}{
		{name: "sentinel present", files: map[string]bool{SentinelPath: true}, want: true},
		{name: "server with several host keys", files: map[string]bool{SentinelPath: true}, ecdsa: true, want: true},
		{name: "sentinel absent", files: map[string]bool{"/etc/hostname": true}},
		{name: "wrong host key", files: map[string]bool{SentinelPath: true}, hostKey: stranger.Public, wantErr: ErrHostKeyMismatch, errMention: "host key"},
		{name: "wrong client key", files: map[string]bool{SentinelPath: true}, clientKey: stranger, wantErr: ErrUnauthorized, errMention: "authentication"},
		{name: "wrong user", files: map[string]bool{SentinelPath: true}, user: "root", wantErr: ErrUnauthorized, errMention: "root"},
		{name: "command not found", noShell: true, wantErr: errAny, errMention: "status 127"},
		{name: "silent server", silent: true, wantErr: ErrTimeout, errMention: "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t, host, client, serverOpts{files: tc.files, silent: tc.silent, noShell: tc.noShell, ecdsaHostKey: tc.ecdsa})
			user, clientKey, hostKey := "capk", client, host.Public
			if tc.user != "" {
				user = tc.user
			}
			if tc.clientKey.Private != nil {
				clientKey = tc.clientKey
			}
			if tc.hostKey != "" {
				hostKey = tc.hostKey
			}
			p := &Prober{Timeout: 500 * time.Millisecond}
			start := time.Now()
			done, err := probeWithin(t, 5*time.Second, func() (bool, error) {
				return p.Probe(context.Background(), srv.addr(), user, clientKey.Private, hostKey)
			})
			elapsed := time.Since(start)
			if tc.wantErr == nil {
				if err != nil || done != tc.want {
					t.Fatalf("Probe = %v, %v; want %v, nil", done, err, tc.want)
				}
			} else {
				if err == nil || !errors.Is(tc.wantErr, errAny) && !errors.Is(err, tc.wantErr) || done {
					t.Fatalf("Probe = %v, %v; want false and an error wrapping %q", done, err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.errMention) {
					t.Fatalf("error %q does not mention %q", err, tc.errMention)
				}
				for _, secret := range []string{string(clientKey.Private), hostKey, clientKey.Public, strings.Fields(hostKey)[1]} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error %q contains key material", err)
					}
				}
			}
			if elapsed > p.Timeout+time.Second {
				t.Fatalf("Probe took %s with a timeout of %s", elapsed, p.Timeout)
			}
			srv.waitAllClosed()
		})
	}
}

func TestProbeUsesDialAndTimeoutDefault(t *testing.T) {
	host, client := mustKeyPair(t), mustKeyPair(t)
	srv := newTestServer(t, host, client, serverOpts{files: map[string]bool{SentinelPath: true}})
	var dialed []string
	p := &Prober{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, network+" "+addr)
		if _, ok := ctx.Deadline(); !ok {
			t.Error("dial context has no deadline although Timeout defaults to 10s")
		}
		return (&net.Dialer{}).DialContext(ctx, network, srv.addr())
	}}
	done, err := p.Probe(context.Background(), "10.244.0.7:22", "capk", client.Private, host.Public)
	if err != nil || !done {
		t.Fatalf("Probe = %v, %v; want true, nil", done, err)
	}
	if len(dialed) != 1 || dialed[0] != "tcp 10.244.0.7:22" {
		t.Fatalf("dialed %q, want [tcp 10.244.0.7:22]", dialed)
	}
	srv.waitAllClosed()

	p.Dial = func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no route to host")
	}
	if _, err := p.Probe(context.Background(), "10.244.0.8:22", "capk", client.Private, host.Public); err == nil || !strings.Contains(err.Error(), "no route to host") {
		t.Fatalf("Probe with a failing dial = %v, want the dial error", err)
	}
}

func TestProbeCanceledContextClosesConnection(t *testing.T) {
	host, client := mustKeyPair(t), mustKeyPair(t)
	srv := newTestServer(t, host, client, serverOpts{silent: true})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	p := &Prober{Timeout: time.Minute}
	start := time.Now()
	_, err := probeWithin(t, 5*time.Second, func() (bool, error) {
		return p.Probe(ctx, srv.addr(), "capk", client.Private, host.Public)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Probe = %v, want context.Canceled", err)
	}
	if errors.Is(err, ErrTimeout) {
		t.Fatalf("a canceled probe reports a timeout: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("Probe took %s after cancellation", elapsed)
	}
	srv.waitAllClosed()
}

func TestProbeRejectsBadKeys(t *testing.T) {
	p := &Prober{Dial: func(context.Context, string, string) (net.Conn, error) {
		t.Error("dialed although the keys are unusable")
		return nil, errors.New("unreachable")
	}}
	kp := mustKeyPair(t)
	if _, err := p.Probe(context.Background(), "10.0.0.1:22", "capk", kp.Private, "not a key"); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Fatalf("bad host key: %v", err)
	}
	bad := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0\n-----END OPENSSH PRIVATE KEY-----\n")
	if _, err := p.Probe(context.Background(), "10.0.0.1:22", "capk", bad, kp.Public); err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Fatalf("bad client key: %v", err)
	}
}
