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
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/machine/sshcheck"
)

type guestKeys struct{ host, client, stranger sshcheck.KeyPair }

func newGuestKeys(t *testing.T) guestKeys {
	t.Helper()
	var k guestKeys
	for _, p := range []*sshcheck.KeyPair{&k.host, &k.client, &k.stranger} {
		var err error
		if *p, err = sshcheck.NewKeyPair(); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func testVMI(name, uid string, ips ...string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	for _, ip := range ips {
		vmi.Status.Interfaces = append(vmi.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{IP: ip, IPs: []string{ip}})
	}
	return vmi
}

// keysCloudConfig is the cloud-config part the provider adds.
func keysCloudConfig(t *testing.T, k guestKeys) string {
	t.Helper()
	out, err := yaml.Marshal(map[string]any{
		"ssh_keys": map[string]string{"ed25519_private": string(k.host.Private), "ed25519_public": k.host.Public},
		"users":    []any{"default", map[string]any{"name": "capk", "ssh_authorized_keys": []string{k.client.Public}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return "#cloud-config\n" + string(out)
}

// nestedMultipart puts the keys, base64-encoded, into a multipart document
// nested in another, beside parts that carry no keys.
func nestedMultipart(keys string) string {
	b64 := base64.StdEncoding.EncodeToString([]byte(keys))
	var wrapped []string
	for len(b64) > 76 {
		wrapped, b64 = append(wrapped, b64[:76]), b64[76:]
	}
	wrapped = append(wrapped, b64)
	inner := "Content-Type: multipart/mixed; boundary=\"in\"\r\nMIME-Version: 1.0\r\n\r\n" +
		"--in\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/sh\necho hello\r\n" +
		"--in\r\nContent-Type: text/cloud-config\r\nContent-Transfer-Encoding: base64\r\n\r\n" + strings.Join(wrapped, "\r\n") + "\r\n" +
		"--in--\r\n"
	return "Content-Type: multipart/mixed; boundary=\"out\"\r\nMIME-Version: 1.0\r\n\r\n" +
		"--out\r\nContent-Type: text/cloud-config\r\n\r\n#cloud-config\nruncmd: [kubeadm join]\r\n" +
		"--out\r\n" + inner + "\r\n--out--\r\n"
}

func ignitionConfig(t *testing.T, k guestKeys, base64Key bool) string {
	t.Helper()
	source := "data:," + url.PathEscape(string(k.host.Private))
	if base64Key {
		source = "data:;base64," + base64.StdEncoding.EncodeToString(k.host.Private)
	}
	child, err := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage":  map[string]any{"files": []any{map[string]any{"path": "/etc/ssh/ssh_host_ed25519_key", "contents": map[string]any{"source": source}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent, err := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.4.0", "config": map[string]any{"merge": []any{map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString(child)}}}},
		"passwd":   map[string]any{"users": []any{map[string]any{"name": "capk", "sshAuthorizedKeys": []string{k.client.Public}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(parent)
}

func probe(s *Simulator, addr, user string, clientKey []byte, hostKey string) (bool, error) {
	p := &sshcheck.Prober{Dial: s.DialGuest, Timeout: 5 * time.Second}
	return p.Probe(context.Background(), addr, user, clientKey, hostKey)
}

func TestGuestSSHReadsUserData(t *testing.T) {
	k := newGuestKeys(t)
	for _, tc := range []struct {
		name, format, data, outcome string
		want                        bool
	}{
		{"bare cloud-config, joined", "cloud-config", keysCloudConfig(t, k), "joined", true},
		{"nested base64 multipart, joined", "cloud-config", nestedMultipart(keysCloudConfig(t, k)), "joined", true},
		{"nested base64 multipart, failed", "cloud-config", nestedMultipart(keysCloudConfig(t, k)), "bootstrap-failed: boom", false},
		{"ignition, percent-encoded key", "ignition", ignitionConfig(t, k, false), "joined", true},
		{"ignition, base64 key", "ignition", ignitionConfig(t, k, true), "joined", true},
		{"ignition, failed", "ignition", ignitionConfig(t, k, true), "bootstrap-failed: boom", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(DefaultOptions())
			defer s.Close()
			s.startSSH(testVMI("vm", "uid-1", "10.244.1.5", "fd00::5"), &Bootstrap{Format: tc.format, Data: []byte(tc.data)}, tc.outcome)
			for _, addr := range []string{"10.244.1.5:22", "[fd00:0::5]:22"} {
				done, err := probe(s, addr, "capk", k.client.Private, k.host.Public)
				if err != nil || done != tc.want {
					t.Fatalf("probe of %s = %v, %v; want %v, nil", addr, done, err, tc.want)
				}
			}
			if _, err := probe(s, "10.244.1.5:22", "capk", k.client.Private, k.stranger.Public); !errors.Is(err, sshcheck.ErrHostKeyMismatch) {
				t.Fatalf("probe expecting another host key = %v, want a host key mismatch", err)
			}
			for _, login := range []struct {
				user string
				key  []byte
			}{{"capk", k.stranger.Private}, {"root", k.client.Private}} {
				if _, err := probe(s, "10.244.1.5:22", login.user, login.key, k.host.Public); !errors.Is(err, sshcheck.ErrUnauthorized) {
					t.Fatalf("probe as %s with another key = %v, want an authentication error", login.user, err)
				}
			}
		})
	}
}

func TestGuestSSHWithoutHostKeyStartsNothing(t *testing.T) {
	k := newGuestKeys(t)
	s := New(DefaultOptions())
	defer s.Close()
	for i, data := range []*Bootstrap{nil, {Format: "cloud-config", Data: []byte("#cloud-config\nruncmd: [true]\n")},
		{Format: "cloud-config", Data: []byte(strings.ReplaceAll(keysCloudConfig(t, k), "OPENSSH", "GARBLED"))}} {
		s.startSSH(testVMI("vm", "uid-1", "10.244.1.5"), data, "joined")
		if _, err := s.DialGuest(context.Background(), "tcp", "10.244.1.5:22"); !errors.Is(err, syscall.EHOSTUNREACH) {
			t.Fatalf("case %d: dial = %v, want no route to host", i, err)
		}
	}
}

func TestGuestSSHLifecycle(t *testing.T) {
	k := newGuestKeys(t)
	s := New(DefaultOptions())
	data := &Bootstrap{Format: "cloud-config", Data: []byte(keysCloudConfig(t, k))}
	vmi := testVMI("vm", "uid-1", "10.244.1.5")
	s.startSSH(vmi, data, "joined")
	first := s.guests.lookup("10.244.1.5:22")
	s.startSSH(vmi, data, "joined")
	if s.guests.lookup("10.244.1.5:22") != first {
		t.Fatal("booting the same VMI again started another server")
	}
	for _, addr := range []string{"10.244.1.6:22", "10.244.1.5:2222", "not-an-address"} {
		if _, err := s.DialGuest(context.Background(), "tcp", addr); err == nil {
			t.Fatalf("dialing %s succeeded", addr)
		}
	}

	// An open connection ends when the guest stops.
	conn, err := s.DialGuest(context.Background(), "tcp", "10.244.1.5:22")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s.stopSSH(types.NamespacedName{Namespace: "ns", Name: "vm"})
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 512)
	for err == nil {
		_, err = conn.Read(buf)
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open after the guest stopped")
	}
	if _, err := s.DialGuest(context.Background(), "tcp", "10.244.1.5:22"); err == nil {
		t.Fatal("dialing a stopped guest succeeded")
	}

	// A restarted VM is a new VMI: a new server, which takes the address.
	s.startSSH(vmi, data, "joined")
	old := s.guests.lookup("10.244.1.5:22")
	s.startSSH(testVMI("vm", "uid-2", "10.244.1.5"), data, "bootstrap-failed: x")
	if s.guests.lookup("10.244.1.5:22") == old {
		t.Fatal("a new VMI of the same name kept the old server")
	}
	if _, err := net.Dial("tcp", old.ln.Addr().String()); err == nil {
		t.Fatal("the old VMI's server still listens")
	}
	if done, err := probe(s, "10.244.1.5:22", "capk", k.client.Private, k.host.Public); done || err != nil {
		t.Fatalf("probe of the new VMI = %v, %v; want false, nil", done, err)
	}

	current := s.guests.lookup("10.244.1.5:22")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", current.ln.Addr().String()); err == nil {
		t.Fatal("a server still listens after Close")
	}
	s.startSSH(testVMI("late", "uid-3", "10.244.1.7"), data, "joined")
	if s.guests.lookup("10.244.1.7:22") != nil {
		t.Fatal("a server started after Close")
	}
}

func TestGuestSSHMapsAddressesLate(t *testing.T) {
	k := newGuestKeys(t)
	scheme := runtime.NewScheme()
	// Pods, namespaces and NetworkPolicies too: the dial asks the
	// policies, of which there are none.
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	booted := testVMI("vm", "uid-1")
	running := testVMI("vm", "uid-1", "10.244.1.9")
	s := New(DefaultOptions())
	defer s.Close()
	s.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(running).Build()
	s.startSSH(booted, &Bootstrap{Format: "ignition", Data: []byte(ignitionConfig(t, k, true))}, "joined")
	if done, err := probe(s, "10.244.1.9:22", "capk", k.client.Private, k.host.Public); !done || err != nil {
		t.Fatalf("probe = %v, %v; want true, nil once the VMI has its IP", done, err)
	}
}

// TestGuestSSHRunsTheCommandTable runs commands over the guest's sshd:
// what the command table holds answers from the guest's files, anything
// else is not found.
func TestGuestSSHRunsTheCommandTable(t *testing.T) {
	k := newGuestKeys(t)
	s := New(DefaultOptions())
	defer s.Close()
	s.startSSH(testVMI("vm", "uid-1", "10.244.1.5"), &Bootstrap{Format: "cloud-config", Data: []byte(keysCloudConfig(t, k))}, "joined")
	signer, err := ssh.ParsePrivateKey(k.client.Private)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(k.host.Public))
	conn, err := s.DialGuest(context.Background(), "tcp", "10.244.1.5:22")
	if err != nil {
		t.Fatal(err)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, "10.244.1.5:22", &ssh.ClientConfig{User: "capk",
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.FixedHostKey(hostKey)})
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(c, chans, reqs)
	defer client.Close()
	for cmd, want := range map[string]int{
		"test -f " + bootstrapSentinel:        0,
		"test -f '" + bootstrapSentinel + "'": 0,
		"test -f /etc/passwd":                 1,
		"cat " + bootstrapSentinel:            0,
		"bash -c 'test -f /x'":                127,
	} {
		session, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		status := 0
		var exitErr *ssh.ExitError
		if err := session.Run(cmd); errors.As(err, &exitErr) {
			status = exitErr.ExitStatus()
		} else if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if status != want {
			t.Fatalf("%s exited %d, want %d", cmd, status, want)
		}
		_ = session.Close()
	}
}
