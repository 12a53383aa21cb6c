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

package tenantcloud

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Access is what a credential points at: the infra API server, the
// namespace of the cluster's VMs, and the ServiceAccount whose token it
// carries. A token outlives none of it: a change of any part, the
// ServiceAccount recreated included, means a new token.
type Access struct {
	Server string
	CAData []byte
	// TLSServerName and Insecure carry over from an external infra
	// cluster's kubeconfig, which the provider's own client uses.
	TLSServerName string
	Insecure      bool
	Namespace     string
	// ServiceAccount is the name, ServiceAccountUID the UID of the
	// ServiceAccount the token belongs to.
	ServiceAccount    string
	ServiceAccountUID string
}

// Hash fingerprints the access, so that a Secret written for other access
// is told apart without reading its token.
func (a Access) Hash() string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(a.Server), a.CAData, []byte(a.TLSServerName), []byte(fmt.Sprint(a.Insecure)),
		[]byte(a.Namespace), []byte(a.ServiceAccount), []byte(a.ServiceAccountUID)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// contextName names the one cluster, user and context of the kubeconfig.
const contextName = "infra"

// MountPath is where the tenant's components mount the Secret. The
// kubeconfig names the token file there: client-go reads it again every
// minute, so a running component picks up a rotated token from its
// Secret volume without a restart.
const MountPath = "/etc/kubernetes/infra"

// Kubeconfig is a kubeconfig for the access with token: the server and its
// CA inline, and the VM namespace as the context's namespace, which the
// KubeVirt cloud provider and CSI driver take as theirs unless told
// otherwise. The token is both the file under MountPath, which client-go
// prefers while it can read it, and inline, which it falls back to, so
// the kubeconfig also works on its own.
func Kubeconfig(a Access, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: a.Server, CertificateAuthorityData: a.CAData,
		TLSServerName: a.TLSServerName, InsecureSkipTLSVerify: a.Insecure}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{Token: token, TokenFile: MountPath + "/" + TokenKey}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName, Namespace: a.Namespace}
	cfg.CurrentContext = contextName
	return clientcmd.Write(*cfg)
}

// RenewalTime is when a token issued at issued and expiring at expires is
// replaced: once four fifths of its lifetime have passed, as the kubelet
// does with projected tokens, which leaves a fifth for a tenant that reads
// its Secret late or a provider that was down.
func RenewalTime(issued, expires time.Time) time.Time {
	return issued.Add(expires.Sub(issued) * 4 / 5)
}
