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
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	runtimeclient "sigs.k8s.io/cluster-api/exp/runtime/client"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runtimeClient is the world's Runtime SDK client, which Cluster API's
// controllers use to discover and call extensions once its RuntimeSDK gate
// is on. Cluster API's own (internal/runtime/client) cannot be imported, so
// this one does what its documentation and the runtime hooks' contract say
// (docs/book/src/tasks/experimental-features/runtime-sdk): discovery and
// calls are JSON POSTs over HTTPS to <base>/<GVHToPath>, trusting the
// ExtensionConfig's caBundle; a handler is registered as
// <handler>.<ExtensionConfig>; a Failure status is an error; a transport
// error is ignored only under failurePolicy Ignore; namespaceSelector
// limits the objects a handler is called for. A Service is reached at its
// ClusterIP, as the world has no cluster DNS.
type runtimeClient struct {
	catalog *runtimecatalog.Catalog
	// reader looks up Services and Namespaces.
	reader client.Reader

	mu       sync.RWMutex
	handlers map[string]registration
	ready    atomic.Bool
}

// registration is one discovered handler.
type registration struct {
	extension       string
	resourceVersion string
	gvh             runtimecatalog.GroupVersionHook
	config          runtimev1.ClientConfig
	namespaces      labels.Selector
	timeout         time.Duration
	ignoreFailure   bool
	settings        map[string]string
}

var _ runtimeclient.Client = &runtimeClient{}

func newRuntimeClient(reader client.Reader) (*runtimeClient, error) {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, err
	}
	return &runtimeClient{catalog: catalog, reader: reader, handlers: map[string]registration{}}, nil
}

// WarmUp registers every ExtensionConfig already discovered.
func (c *runtimeClient) WarmUp(list *runtimev1.ExtensionConfigList) error {
	var errs []error
	for i := range list.Items {
		errs = append(errs, c.Register(&list.Items[i]))
	}
	c.ready.Store(true)
	return errors.Join(errs...)
}

// IsReady reports whether WarmUp ran.
func (c *runtimeClient) IsReady() bool { return c.ready.Load() }

// Discover asks the extension for its handlers and returns ext with them
// in its status.
func (c *runtimeClient) Discover(ctx context.Context, ext *runtimev1.ExtensionConfig) (*runtimev1.ExtensionConfig, error) {
	gvh, err := c.catalog.GroupVersionHook(runtimehooksv1.Discovery)
	if err != nil {
		return nil, err
	}
	resp := &runtimehooksv1.DiscoveryResponse{}
	if err := c.post(ctx, ext.Spec.ClientConfig, gvh, "", 10*time.Second, &runtimehooksv1.DiscoveryRequest{}, resp); err != nil {
		return nil, fmt.Errorf("discovering extension %s: %w", ext.Name, err)
	}
	if resp.GetStatus() != runtimehooksv1.ResponseStatusSuccess {
		return nil, fmt.Errorf("discovering extension %s: %s", ext.Name, resp.GetMessage())
	}
	out := ext.DeepCopy()
	out.Status.Handlers = []runtimev1.ExtensionHandler{}
	for _, h := range resp.Handlers {
		hgvh, err := hookOf(h.RequestHook.APIVersion, h.RequestHook.Hook)
		if err != nil || !c.catalog.IsHookRegistered(hgvh) {
			return nil, fmt.Errorf("discovering extension %s: handler %s serves unknown hook %s", ext.Name, h.Name, hgvh)
		}
		out.Status.Handlers = append(out.Status.Handlers, runtimev1.ExtensionHandler{
			Name:           h.Name + "." + ext.Name,
			RequestHook:    runtimev1.GroupVersionHook{APIVersion: h.RequestHook.APIVersion, Hook: h.RequestHook.Hook},
			TimeoutSeconds: ptr.Deref(h.TimeoutSeconds, runtimehooksv1.DefaultHandlersTimeoutSeconds),
			FailurePolicy:  runtimev1.FailurePolicy(ptr.Deref(h.FailurePolicy, runtimehooksv1.FailurePolicyFail)),
		})
	}
	return out, nil
}

// hookOf is the hook a handler names by apiVersion and hook.
func hookOf(apiVersion, hook string) (runtimecatalog.GroupVersionHook, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return runtimecatalog.GroupVersionHook{}, err
	}
	return runtimecatalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: hook}, nil
}

// Register records the handlers of a discovered ExtensionConfig, replacing
// what it had before.
func (c *runtimeClient) Register(ext *runtimev1.ExtensionConfig) error {
	selector := labels.Everything()
	if ext.Spec.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(ext.Spec.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("ExtensionConfig %s: %w", ext.Name, err)
		}
		selector = s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unregisterLocked(ext.Name)
	for _, h := range ext.Status.Handlers {
		gvh, err := hookOf(h.RequestHook.APIVersion, h.RequestHook.Hook)
		if err != nil {
			return err
		}
		c.handlers[h.Name] = registration{
			extension: ext.Name, resourceVersion: ext.ResourceVersion,
			gvh:    gvh,
			config: ext.Spec.ClientConfig, namespaces: selector,
			timeout:       time.Duration(h.TimeoutSeconds) * time.Second,
			ignoreFailure: h.FailurePolicy == runtimev1.FailurePolicyIgnore,
			settings:      ext.Spec.Settings,
		}
	}
	return nil
}

// Unregister forgets the ExtensionConfig's handlers.
func (c *runtimeClient) Unregister(ext *runtimev1.ExtensionConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unregisterLocked(ext.Name)
	return nil
}

func (c *runtimeClient) unregisterLocked(extension string) {
	for name, r := range c.handlers {
		if r.extension == extension {
			delete(c.handlers, name)
		}
	}
}

// GetAllExtensions names the handlers of hook whose namespaceSelector
// takes forObject's namespace.
func (c *runtimeClient) GetAllExtensions(ctx context.Context, hook runtimecatalog.Hook, forObject client.Object) ([]string, error) {
	gvh, err := c.catalog.GroupVersionHook(hook)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	candidates := map[string]registration{}
	for name, r := range c.handlers {
		if r.gvh.GroupHook() == gvh.GroupHook() {
			candidates[name] = r
		}
	}
	c.mu.RUnlock()
	var names []string
	for name, r := range candidates {
		ok, err := c.namespaceMatches(ctx, r.namespaces, forObject.GetNamespace())
		if err != nil {
			return nil, err
		}
		if ok {
			names = append(names, name)
		}
	}
	return names, nil
}

func (c *runtimeClient) namespaceMatches(ctx context.Context, selector labels.Selector, namespace string) (bool, error) {
	if selector.Empty() {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := c.reader.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return false, err
	}
	return selector.Matches(labels.Set(ns.Labels)), nil
}

// CallAllExtensions calls every handler of hook for forObject in turn,
// stopping at the first error, and merges their answers into response:
// the messages joined, the lowest retry.
func (c *runtimeClient) CallAllExtensions(ctx context.Context, hook runtimecatalog.Hook, forObject client.Object, request runtimehooksv1.RequestObject, response runtimehooksv1.ResponseObject) error {
	gvh, err := c.catalog.GroupVersionHook(hook)
	if err != nil {
		return err
	}
	names, err := c.GetAllExtensions(ctx, hook, forObject)
	if err != nil {
		return err
	}
	var messages []string
	var retry int32
	for _, name := range names {
		obj, err := c.catalog.NewResponse(gvh)
		if err != nil {
			return err
		}
		one := obj.(runtimehooksv1.ResponseObject)
		if err := c.CallExtension(ctx, hook, forObject, name, request, one); err != nil {
			return err
		}
		if m := one.GetMessage(); m != "" {
			messages = append(messages, m)
		}
		if r, ok := one.(runtimehooksv1.RetryResponseObject); ok {
			retry = util.LowestNonZeroInt32(retry, r.GetRetryAfterSeconds())
		}
	}
	response.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	response.SetMessage(strings.Join(messages, ", "))
	if r, ok := response.(runtimehooksv1.RetryResponseObject); ok {
		r.SetRetryAfterSeconds(retry)
	}
	return nil
}

// CallExtension calls the handler name for forObject.
func (c *runtimeClient) CallExtension(ctx context.Context, hook runtimecatalog.Hook, forObject client.Object, name string, request runtimehooksv1.RequestObject, response runtimehooksv1.ResponseObject, opts ...runtimeclient.CallExtensionOption) error {
	options := &runtimeclient.CallExtensionOptions{}
	for _, o := range opts {
		o.ApplyToOptions(options)
	}
	gvh, err := c.catalog.GroupVersionHook(hook)
	if err != nil {
		return err
	}
	c.mu.RLock()
	r, found := c.handlers[name]
	c.mu.RUnlock()
	if !found || r.gvh.GroupHook() != gvh.GroupHook() {
		return fmt.Errorf("calling extension handler %q: not registered for hook %s", name, gvh.GroupHook())
	}
	if ok, err := c.namespaceMatches(ctx, r.namespaces, forObject.GetNamespace()); err != nil {
		return fmt.Errorf("calling extension handler %q: %w", name, err)
	} else if !ok {
		return fmt.Errorf("calling extension handler %q: namespaceSelector does not take %s/%s", name, forObject.GetNamespace(), forObject.GetName())
	}
	if len(r.settings) > 0 {
		request = request.DeepCopyObject().(runtimehooksv1.RequestObject)
		merged := maps.Clone(r.settings)
		maps.Copy(merged, request.GetSettings())
		request.SetSettings(merged)
	}
	key := ""
	if options.WithCaching {
		key = options.CacheKeyFunc(name, r.resourceVersion, request)
		if hit, ok := options.Cache.Has(key); ok {
			reflect.Indirect(reflect.ValueOf(response)).Set(reflect.Indirect(reflect.ValueOf(hit.Response)))
			return nil
		}
	}
	timeout := r.timeout
	if timeout == 0 {
		timeout = runtimehooksv1.DefaultHandlersTimeoutSeconds * time.Second
	}
	err = c.post(ctx, r.config, r.gvh, strings.TrimSuffix(name, "."+r.extension), timeout, request, response)
	if err != nil {
		if r.ignoreFailure {
			response.SetStatus(runtimehooksv1.ResponseStatusSuccess)
			response.SetMessage("")
			return nil
		}
		return fmt.Errorf("calling extension handler %q: %w", name, err)
	}
	if response.GetStatus() == runtimehooksv1.ResponseStatusFailure {
		return fmt.Errorf("extension handler %q failed: %s", name, response.GetMessage())
	}
	if options.WithCaching {
		options.Cache.Add(runtimeclient.CallExtensionCacheEntry{CacheKey: key, Response: response})
	}
	return nil
}

// post sends request to the handler named handler (discovery: none) of
// the extension at config and decodes its answer into response.
func (c *runtimeClient) post(ctx context.Context, config runtimev1.ClientConfig, gvh runtimecatalog.GroupVersionHook, handler string,
	timeout time.Duration, request runtime.Object, response runtime.Object) error {
	target, dialAddr, err := c.target(ctx, config)
	if err != nil {
		return err
	}
	target.Path = path.Join(target.Path, runtimecatalog.GVHToPath(gvh, handler))
	gvk, err := c.catalog.Request(gvh)
	if err != nil {
		return err
	}
	request.GetObjectKind().SetGroupVersionKind(gvk)
	body, err := json.Marshal(request)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if len(config.CABundle) > 0 && !pool.AppendCertsFromPEM(config.CABundle) {
		return errors.New("the caBundle holds no PEM certificate")
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: target.Hostname(), MinVersion: tls.VersionTLS12}}
	if dialAddr != "" {
		transport.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, dialAddr)
		}
	}
	defer transport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	return json.NewDecoder(resp.Body).Decode(response)
}

// target is the extension's base URL and, for a Service, the address
// the world serves it at: its ClusterIP.
func (c *runtimeClient) target(ctx context.Context, config runtimev1.ClientConfig) (*url.URL, string, error) {
	if !config.Service.IsDefined() {
		u, err := url.Parse(config.URL)
		if err != nil || u.Scheme != "https" {
			return nil, "", fmt.Errorf("clientConfig.url %q is not an https URL", config.URL)
		}
		return u, "", nil
	}
	s := config.Service
	port := ptr.Deref(s.Port, 443)
	svc := &corev1.Service{}
	if err := c.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, svc); err != nil {
		return nil, "", fmt.Errorf("looking up the extension's Service: %w", err)
	}
	host := s.Name + "." + s.Namespace + ".svc"
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port))), Path: s.Path},
		net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))), nil
}
