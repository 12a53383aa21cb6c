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
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// operatorComponent is a component the world installs as its operator
// would (KubeVirt, CDI): the objects of the operator's install set, an
// aggregated API server that also serves the component's webhooks, and a
// controller. One sequence starts each (startComponent); the fields say
// what differs.
type operatorComponent struct {
	// dir is the component's directory under the components' one, where
	// its certificates and kubeconfigs are written.
	dir       string
	namespace string
	// install reads the operator's install set.
	install func() ([]*unstructured.Unstructured, error)
	// caName names the CA that signs the API server's certificates; it is
	// made before the install set is applied, since prepare may publish it.
	caName string
	// prepare edits an object of the install set (a copy) before it is
	// applied, or leaves it out (keep false). It runs before the
	// deferredKinds are set aside, so it can leave out one of those too.
	prepare func(o *unstructured.Unstructured, ca *keyPair) (keep bool, err error)
	// installed does what the operator does once the install set is in,
	// before anything runs.
	installed func(ctx context.Context) error
	api       aggregatedAPIServer
	ctrl      componentController
}

// aggregatedAPIServer is a component's API server: it listens on port 443
// of its Service's loopback ClusterIP, where the API server calls its
// webhooks and APIService.
type aggregatedAPIServer struct {
	// service is the Service the API server is reached through; its
	// serving certificate names it.
	service string
	// process names the binary, its log and its certificate files.
	process string
	// account is the service account it authenticates as.
	account string
	// endpoint is the address published as the Service's endpoint, for
	// the aggregator to count the APIService available: a TEST-NET
	// address that nothing dials (virtAPIEndpoint says why).
	endpoint string
	// apiService is the APIService waited for.
	apiService string
	// flags, if set, makes the API server's flags that go after the
	// common ones (kubeconfig, address, serving certificate) and before
	// the verbosity.
	flags func(dir string, ca *keyPair) ([]string, error)
}

// componentController is a component's controller, started once its API
// server serves (it calls its webhooks).
type componentController struct {
	// process names the binary and its log.
	process string
	// account is the service account it authenticates as.
	account string
	// lease is its leader election Lease, held once it runs.
	lease string
	// env is added to its environment.
	env []string
	// flags makes the controller's flags that go after its kubeconfig.
	flags func(ctx context.Context, dir string, ca *keyPair) ([]string, error)
}

// startComponent installs c and runs its API server and controller: the
// namespace, the install set less its deferredKinds, the API server with a
// serving certificate for its Service's ClusterIP, then the deferred
// webhook configurations and APIServices trusting the component's CA, and
// last the controller.
func (e *Env) startComponent(ctx context.Context, c *operatorComponent) error {
	objs, err := c.install()
	if err != nil {
		return err
	}
	if _, err := e.componentsKubeconfig(); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}
	if err := e.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", c.namespace, err)
	}
	ca, err := newCA(c.caName)
	if err != nil {
		return err
	}
	var deferred []*unstructured.Unstructured
	for _, o := range objs {
		o = o.DeepCopy()
		keep, err := c.prepare(o, ca)
		if err != nil {
			return err
		}
		switch {
		case !keep:
			continue
		case deferredKinds[o.GetKind()]:
			deferred = append(deferred, o)
			continue
		}
		if err := e.apply(ctx, o); err != nil {
			return err
		}
	}
	if err := c.installed(ctx); err != nil {
		return err
	}
	dir := filepath.Join(e.componentsDir, c.dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := e.startAPIServer(ctx, c, dir, ca); err != nil {
		return err
	}
	for _, o := range deferred {
		if err := setCABundle(o, ca.certPEM()); err != nil {
			return err
		}
		if err := e.apply(ctx, o); err != nil {
			return err
		}
	}
	if err := e.publishEndpoint(ctx, c.namespace, c.api.service, c.api.endpoint, 8443); err != nil {
		return err
	}
	if err := e.waitAPIServiceAvailable(ctx, c.api.apiService); err != nil {
		return err
	}
	return e.startController(ctx, c, dir, ca)
}

// startAPIServer runs c's API server on the loopback ClusterIP of its
// Service and waits until it serves.
func (e *Env) startAPIServer(ctx context.Context, c *operatorComponent, dir string, ca *keyPair) error {
	api := c.api
	svc := &corev1.Service{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: api.service}, svc); err != nil {
		return err
	}
	apiIP := net.ParseIP(svc.Spec.ClusterIP)
	if apiIP == nil || !apiIP.IsLoopback() {
		return fmt.Errorf("service %s has ClusterIP %q, not on loopback where the world can serve it", api.service, svc.Spec.ClusterIP)
	}
	host := api.service + "." + c.namespace + ".svc"
	serving, err := ca.sign(host, x509.ExtKeyUsageServerAuth,
		[]string{api.service, api.service + "." + c.namespace, host, host + ".cluster.local"}, []net.IP{apiIP})
	if err != nil {
		return err
	}
	servingCert, servingKey, err := serving.write(dir, api.process)
	if err != nil {
		return err
	}
	var extra []string
	if api.flags != nil {
		if extra, err = api.flags(dir, ca); err != nil {
			return err
		}
	}
	kubeconfig, err := e.serviceAccountKubeconfig(dir, c.namespace, api.account)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", kubeconfig, "--listen", apiIP.String(), "--port", "443",
		"--tls-cert-file", servingCert, "--tls-key-file", servingKey,
	}
	args = append(args, extra...)
	args = append(args, "-v", "2")
	if err := e.startProcess(BinDir(), api.process, api.process, args); err != nil {
		return err
	}
	if err := waitServing(ctx, ca, host, net.JoinHostPort(apiIP.String(), "443")); err != nil {
		// Port 443 is privileged: the world runs as root, as CI does.
		return fmt.Errorf("%s on the ClusterIP of its Service, port 443 (binding it needs root): %w (log: %s)",
			api.process, err, filepath.Join(e.componentsDir, api.process+".log"))
	}
	return nil
}

// startController runs c's controller and waits until it leads.
func (e *Env) startController(ctx context.Context, c *operatorComponent, dir string, ca *keyPair) error {
	ctrl := c.ctrl
	extra, err := ctrl.flags(ctx, dir, ca)
	if err != nil {
		return err
	}
	kubeconfig, err := e.serviceAccountKubeconfig(dir, c.namespace, ctrl.account)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := e.startProcessEnv(BinDir(), ctrl.process, ctrl.process,
		append([]string{"--kubeconfig", kubeconfig}, extra...), ctrl.env); err != nil {
		return err
	}
	if err := e.waitLeader(ctx, c.namespace, ctrl.lease, started); err != nil {
		return fmt.Errorf("%w (log: %s)", err, filepath.Join(e.componentsDir, ctrl.process+".log"))
	}
	return nil
}

// deferredKinds call the component's API server, so they are applied
// once it serves.
var deferredKinds = map[string]bool{"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "APIService": true}

// apply creates o, or replaces what a world started earlier from the same
// state left (its certificates are new).
func (e *Env) apply(ctx context.Context, o *unstructured.Unstructured) error {
	err := e.Client.Create(ctx, o)
	if apierrors.IsAlreadyExists(err) {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(o.GroupVersionKind())
		if err = e.Client.Get(ctx, client.ObjectKeyFromObject(o), existing); err == nil {
			o.SetResourceVersion(existing.GetResourceVersion())
			if o.GetKind() == "Service" {
				// A Service's ClusterIP cannot change.
				o = existing
			}
			err = e.Client.Update(ctx, o)
		}
	}
	if err != nil {
		return fmt.Errorf("installing %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// serviceAccountUser is the user a service account's token would
// authenticate as.
func serviceAccountUser(namespace, name string) envtest.User {
	return envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// serviceAccountKubeconfig writes a kubeconfig whose client certificate
// authenticates as the service account: RBAC binds service account
// subjects by user name, so the component gets exactly the permissions
// its operator grants it.
func (e *Env) serviceAccountKubeconfig(dir, namespace, name string) (string, error) {
	user, err := e.ControlPlane.AddUser(serviceAccountUser(namespace, name), nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// setCABundle trusts ca in every client config of a webhook configuration
// or APIService.
func setCABundle(o *unstructured.Unstructured, caPEM []byte) error {
	ca := base64.StdEncoding.EncodeToString(caPEM)
	if o.GetKind() == "APIService" {
		return unstructured.SetNestedField(o.Object, ca, "spec", "caBundle")
	}
	hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return err
	}
	for i := range hooks {
		h, ok := hooks[i].(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: webhook %d is not an object", o.GetKind(), o.GetName(), i)
		}
		if err := unstructured.SetNestedField(h, ca, "clientConfig", "caBundle"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
}

// componentStartTimeout bounds each wait for a world component to come
// up (serving, available, leading). Alone, each takes a few seconds; with
// four worlds starting at once on 2 cores, virt-api once took more than a
// minute to listen, so the bound only catches one that never comes up.
const componentStartTimeout = 3 * time.Minute

// waitServing waits until addr completes a TLS handshake with a
// certificate of ca and answers /healthz.
func waitServing(ctx context.Context, ca *keyPair, serverName, addr string) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	defer httpClient.CloseIdleConnections()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/healthz", nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_ = resp.Body.Close()
		last = fmt.Errorf("/healthz answered %s", resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("not serving on %s within %s: %w", addr, componentStartTimeout, errors.Join(err, last))
	}
	return nil
}

// publishEndpoint publishes addr as the endpoint of a Service, so that the
// aggregator finds one.
func (e *Env) publishEndpoint(ctx context.Context, namespace, service, addr string, port int32) error {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: service + "-world", Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "world.capkv.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := e.Client.Create(ctx, slice); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("publishing %s's endpoint: %w", service, err)
	}
	return nil
}

// waitAPIServiceAvailable waits until the aggregator reaches an APIService.
func (e *Env) waitAPIServiceAvailable(ctx context.Context, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		svc := &unstructured.Unstructured{}
		svc.SetAPIVersion("apiregistration.k8s.io/v1")
		svc.SetKind("APIService")
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, svc); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not available within %s (%s): %w", name, componentStartTimeout, last, err)
	}
	return nil
}

// waitLeader waits until a component holds its leader election Lease,
// renewed since it started (a world resumed from kept state finds the
// Lease of the process before).
func (e *Env) waitLeader(ctx context.Context, namespace, lease string, since time.Time) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, componentStartTimeout, true, func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		last = e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: lease}, l)
		if apierrors.IsNotFound(last) {
			return false, nil
		}
		return last == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" &&
			l.Spec.RenewTime != nil && !l.Spec.RenewTime.Before(&metav1.MicroTime{Time: since.Truncate(time.Second)}), last
	})
	if err != nil {
		return fmt.Errorf("%s took no leader Lease within %s: %w", lease, componentStartTimeout, errors.Join(err, last))
	}
	return nil
}
