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
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/cluster-api/util/certs"
)

// keyPair is a certificate with its key.
type keyPair struct {
	cert *x509.Certificate
	key  *rsa.PrivateKey
}

// newCA makes a self-signed certificate authority.
func newCA(name string) (*keyPair, error) {
	key, err := certs.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// sign issues a certificate for a client (no names) or a server.
func (ca *keyPair) sign(commonName string, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP) (*keyPair, error) {
	key, err := certs.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	cfg := certs.Config{CommonName: commonName, AltNames: certs.AltNames{DNSNames: dnsNames, IPs: ips}, Usages: []x509.ExtKeyUsage{usage}}
	cert, err := cfg.NewSignedCert(key, ca.cert, ca.key)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// write saves the pair as dir/name.crt and dir/name.key and returns both
// paths.
func (p *keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	return certFile, keyFile, errors.Join(
		os.WriteFile(certFile, certs.EncodeCertPEM(p.cert), 0o600),
		os.WriteFile(keyFile, certs.EncodePrivateKeyPEM(p.key), 0o600))
}

// certPEM is the certificate alone, PEM encoded.
func (p *keyPair) certPEM() []byte { return certs.EncodeCertPEM(p.cert) }

// frontProxyFlags turn on kube-apiserver's aggregation layer: it proxies
// an APIService's requests with a client certificate of the front-proxy CA,
// and publishes that CA in kube-system/extension-apiserver-authentication,
// where an aggregated API server (virt-api) reads it at start. The files
// are written to dir.
func frontProxyFlags(dir string) (map[string]string, error) {
	ca, err := newCA("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	client, err := ca.sign("front-proxy-client", x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	caFile, _, err := ca.write(dir, "front-proxy-ca")
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := client.write(dir, "front-proxy-client")
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"requestheader-client-ca-file":       caFile,
		"requestheader-allowed-names":        "front-proxy-client",
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             certFile,
		"proxy-client-key-file":              keyFile,
	}, nil
}
