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

// Package sshcheck checks over SSH whether a machine's bootstrap finished,
// for KubevirtMachines whose bootstrap check strategy is "ssh". Unlike a
// plain SSH client it never trusts an unknown host: the provider generates
// each VM's host key itself, puts it into the VM's user data, and accepts
// only that key when it connects.
package sshcheck

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/proxy"

	"golang.org/x/crypto/ssh"
)

// SentinelPath is the file Cluster API bootstrap providers write when
// bootstrap succeeded.
const SentinelPath = "/run/cluster-api/bootstrap-success.complete"

// DefaultTimeout bounds a probe when Prober.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Errors a probe wraps, so that callers can tell why it failed without
// parsing messages.
var (
	// ErrHostKeyMismatch means the server did not present the expected
	// host key: another host answers on the VM's address, or the VM did
	// not install the key it was given.
	ErrHostKeyMismatch = errors.New("host key mismatch")
	// ErrUnauthorized means the server refused the client key for the user.
	ErrUnauthorized = errors.New("authentication failed")
	// ErrTimeout means the probe did not finish within its timeout.
	ErrTimeout = errors.New("timed out")
)

// KeyPair is an ed25519 key pair in OpenSSH formats.
type KeyPair struct {
	// Private is the private key as a PEM "OPENSSH PRIVATE KEY" block, the
	// format sshd reads host keys in and cloud-init's ssh_keys expects.
	Private []byte
	// Public is the public key as an authorized_keys line without a
	// trailing newline, so it can be embedded in YAML or JSON as it is.
	Public string
}

// NewKeyPair generates a fresh ed25519 key pair.
func NewKeyPair() (KeyPair, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generating ed25519 key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return KeyPair{}, fmt.Errorf("encoding private key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encoding public key: %w", err)
	}
	return KeyPair{
		Private: pem.EncodeToMemory(block),
		Public:  strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(sshPub)), "\n"),
	}, nil
}

// Prober checks bootstrap completion over SSH.
type Prober struct {
	// Dial opens the TCP connection; nil dials through the SOCKS5 proxy in
	// ALL_PROXY (socks5://host:port; other schemes are ignored) unless
	// NO_PROXY lists the address, else directly. Tests route VM addresses
	// through it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds the whole probe (dial, handshake, command); zero means
	// DefaultTimeout.
	Timeout time.Duration
}

// Probe connects to addr (host:port), requires the host key hostPublicKey
// (an authorized_keys line), logs in as user with clientPrivateKey, and
// reports whether the sentinel file exists. A host key mismatch, an
// authentication failure or a timeout is an error saying which (wrapping
// ErrHostKeyMismatch, ErrUnauthorized or ErrTimeout); errors never contain
// key material. It returns false and no error when the command ran and the
// file is absent. The connection is always closed before Probe returns.
func (p *Prober) Probe(ctx context.Context, addr, user string, clientPrivateKey []byte, hostPublicKey string) (done bool, err error) {
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostPublicKey))
	if err != nil {
		// The parser's own error is left out so that no message can ever
		// echo key material; it would add little anyway.
		return false, errors.New("ssh probe: parsing the expected host public key failed")
	}
	signer, err := ssh.ParsePrivateKey(clientPrivateKey)
	if err != nil {
		return false, errors.New("ssh probe: parsing the client private key failed")
	}

	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	deadline, _ := ctx.Deadline()
	// ctxErr turns a failure caused by the context into an error naming
	// the timeout, since the underlying error is then just "use of closed
	// network connection" or "i/o timeout". It compares the clock rather
	// than only ctx.Err() because the connection deadline may fire a moment
	// before the context's timer does.
	ctxErr := func(stage string) error {
		if perr := parent.Err(); perr != nil {
			return fmt.Errorf("ssh probe of %s: %s: %w", addr, stage, perr)
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return fmt.Errorf("ssh probe of %s: %s: %w after %s", addr, stage, ErrTimeout, timeout)
		}
		return nil
	}

	dial := p.Dial
	if dial == nil {
		// Through the SOCKS5 proxy in ALL_PROXY, unless NO_PROXY exempts
		// the address: a management cluster often reaches tenant networks
		// only through such a gateway. Without ALL_PROXY, a direct dial.
		dial = proxy.Dial
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		if cerr := ctxErr("dialing"); cerr != nil {
			return false, cerr
		}
		return false, fmt.Errorf("ssh probe of %s: dialing: %w", addr, err)
	}
	defer conn.Close()
	// The SSH library has no context support: closing the connection when
	// the context ends is what unblocks a handshake or command that hangs.
	// The deadline is a second guard, for conns from a custom Dial whose
	// Close might not interrupt a blocked Read.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	_ = conn.SetDeadline(deadline)

	// The callback runs on the SSH library's handshake goroutine.
	var hostKeyMismatch atomic.Bool
	fixed := ssh.FixedHostKey(hostKey)
	config := &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			if err := fixed(hostname, remote, key); err != nil {
				hostKeyMismatch.Store(true)
				return err
			}
			return nil
		},
		// Ask only for the algorithm of the key we know; a server that
		// also has other host keys would otherwise present whichever it
		// prefers and fail the exact comparison.
		HostKeyAlgorithms: hostKeyAlgorithms(hostKey),
		Timeout:           timeout,
	}
	sshConn, chans, reqs, err := ssh.NewClientConn(conn, addr, config)
	if err != nil {
		if hostKeyMismatch.Load() {
			return false, fmt.Errorf("ssh probe of %s: %w: the server did not present the VM's host key", addr, ErrHostKeyMismatch)
		}
		if cerr := ctxErr("handshake"); cerr != nil {
			return false, cerr
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			// x/crypto reports a refused login only through this message.
			return false, fmt.Errorf("ssh probe of %s: %w for user %q", addr, ErrUnauthorized, user)
		}
		return false, fmt.Errorf("ssh probe of %s: handshake: %w", addr, err)
	}
	client := ssh.NewClient(sshConn, chans, reqs)
	defer client.Close()

	session, err := client.NewSession()
	if err != nil {
		if cerr := ctxErr("opening session"); cerr != nil {
			return false, cerr
		}
		return false, fmt.Errorf("ssh probe of %s: opening session: %w", addr, err)
	}
	defer session.Close()

	err = session.Run("test -f " + SentinelPath)
	var exitErr *ssh.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exitErr) && exitErr.ExitStatus() == 1:
		// test(1) exits 1 exactly when the file is absent; other statuses
		// mean the command itself did not work.
		return false, nil
	case errors.As(err, &exitErr):
		return false, fmt.Errorf("ssh probe of %s: checking %s exited with status %d", addr, SentinelPath, exitErr.ExitStatus())
	}
	if cerr := ctxErr("running command"); cerr != nil {
		return false, cerr
	}
	return false, fmt.Errorf("ssh probe of %s: running command: %w", addr, err)
}

// hostKeyAlgorithms lists the signature algorithms that can verify key.
func hostKeyAlgorithms(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		// An RSA key signs with SHA-2 on modern servers; the key type name
		// alone would only allow SHA-1.
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{key.Type()}
}
