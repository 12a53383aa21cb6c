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
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
)

// lbProxy serves one tenant's control-plane load balancer address. Cluster
// API's in-memory mux routes by port alone and binds every address, so two
// tenants whose load balancers share a port (6443) on different addresses
// cannot each get a mux listener there. Instead every tenant listens on a
// free port of the shared mux, and this proxy terminates TLS on the load
// balancer address with a certificate for it, signed by the tenant's CA as
// the real API server's would be, and forwards each request (port-forward
// upgrades included) to that port.
type lbProxy struct {
	listener  net.Listener
	server    *http.Server
	transport *http.Transport
}

// startLBProxy listens on host:port and forwards to backend, the tenant's
// mux listener.
func (w *Workloads) startLBProxy(cluster types.NamespacedName, host string, port int32, backend string) (*lbProxy, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port))) //nolint:noctx // a listener for the world's lifetime
	if err != nil {
		return nil, fmt.Errorf("listening on the load balancer address of %s: %w", cluster, err)
	}
	certs := &servingCert{host: host, load: func(ctx context.Context) (*x509.Certificate, *rsa.PrivateKey, error) {
		return w.caOf(ctx, cluster, secret.ClusterCA)
	}}
	target := &url.URL{Scheme: "https", Host: backend}
	transport := &http.Transport{
		// The hop is in-process loopback to the mux, whose own
		// certificate names 127.0.0.1; the client verified ours.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
	}
	proxy := &httputil.ReverseProxy{
		// SetURL also rewrites the Host header, which the mux reads to
		// find the tenant and port-forward dials.
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p := &lbProxy{listener: l, transport: transport, server: &http.Server{
		Handler:           nodeStatus(withUIDs(proxy)),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get},
	}}
	go func() { _ = p.server.ServeTLS(l, "", "") }()
	return p, nil
}

func (p *lbProxy) close() error {
	defer p.transport.CloseIdleConnections()
	err := p.server.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// servingCert makes the load balancer's serving certificate on the first
// handshake: the tenant's CA exists only once Cluster API generated it.
type servingCert struct {
	host string
	load func(context.Context) (*x509.Certificate, *rsa.PrivateKey, error)
	mu   sync.Mutex
	cert *tls.Certificate
}

func (s *servingCert) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil {
		return s.cert, nil
	}
	ca, caKey, err := s.load(hello.Context())
	if err != nil {
		return nil, err
	}
	key, err := certs.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	cfg := certs.Config{
		CommonName: "kube-apiserver",
		AltNames: certs.AltNames{
			DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1)},
		},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(s.host); ip != nil {
		cfg.AltNames.IPs = append(cfg.AltNames.IPs, ip)
	} else {
		cfg.AltNames.DNSNames = append(cfg.AltNames.DNSNames, s.host)
	}
	cert, err := cfg.NewSignedCert(key, ca, caKey)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certs.EncodeCertPEM(cert), certs.EncodePrivateKeyPEM(key))
	if err != nil {
		return nil, err
	}
	s.cert = &pair
	return s.cert, nil
}
