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

package infracluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/metrics"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/movable"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// Infra is an infra cluster as a controller uses it.
type Infra struct {
	// Client reads KubeVirt and CDI objects from a cache kept current by
	// watches, and writes directly. Secrets are read uncached.
	Client client.Client
	// APIReader reads directly from the API server, to confirm what the
	// cache says is missing.
	APIReader client.Reader
	// Cache is what Client reads from; watches are added to it.
	Cache cache.Cache
	// Namespace is the namespace used on the infra cluster.
	Namespace string
	// External is true when the infra cluster is not the management cluster.
	External bool
	// Key identifies the infra cluster: empty for the management cluster,
	// else the kubeconfig Secret and namespace.
	Key string
	// Secret is the kubeconfig Secret of an external infra cluster; empty
	// for the management cluster.
	Secret types.NamespacedName
	// Status says whether the infra cluster serves the KubeVirt and CDI APIs,
	// as of when the Infra was handed out.
	Status APIStatus
	// Server is the infra API server's URL as the provider reaches it, and
	// CAData the certificates it is verified with: what a credential handed
	// to a tenant cluster points at unless told otherwise.
	Server string
	CAData []byte
	// TLSServerName and Insecure are the rest of how the server is
	// verified, as an external infra cluster's kubeconfig says.
	TLSServerName string
	Insecure      bool
	// Guest is what the object's KubevirtClusterIdentity allows its VMs
	// beyond the defaults (tenancy.Guest).
	Guest infrav1.GuestAllowances
}

// Description names the infra cluster for messages and Events.
func (i *Infra) Description() string {
	if i.External {
		return "external infra cluster " + i.Key
	}
	return "management cluster"
}

// User is an object that uses an infra cluster.
type User struct {
	// Kind tells objects of the same name apart.
	Kind string
	types.NamespacedName
}

// metricsKey names the user in the metrics' own bookkeeping, never in a
// label.
func (u User) metricsKey() string { return u.Kind + "/" + u.String() }

// WatchFunc adds a controller's watches to the cache of an infra cluster.
// It runs once per cache: for the management cluster when its APIs are
// first found, for an external one whenever its cache is (re)built.
type WatchFunc func(infra *Infra) error

// Clients hands out one cached client and watch set per infra cluster
// (kubeconfig Secret and namespace), shared by every object that uses it.
// An external cluster's cache is rebuilt when its kubeconfig changes and
// stopped when no object uses it any more.
type Clients struct {
	checker *Checker
	scheme  *runtime.Scheme
	local   *Infra
	// WrapConfig, when set, adjusts the rest.Config of external clusters
	// (tests count requests with it).
	WrapConfig func(*rest.Config)

	mu      sync.Mutex
	entries map[string]*entry
	users   map[User]string

	// watchMu guards the watch functions and which caches have them. It is
	// not mu: a controller's Watch blocks while that controller starts and
	// waits for its event handlers to take in their first events, and one
	// of those handlers calls ForgetAPIs, which takes mu.
	watchMu      sync.Mutex
	watches      []WatchFunc
	localWatched bool

	lostMu sync.Mutex
	onLost []func(User)
}

// OnLost registers f to be told of every user of an external infra
// cluster whose API server went out of reach, and again when it is back: a
// machine that is provisioned makes no request of its own there, and would
// otherwise go on reporting the infra cluster available. f must not block.
func (c *Clients) OnLost(f func(User)) {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	c.onLost = append(c.onLost, f)
}

// detectLoss wraps an infra cluster's transport: a request that cannot
// reach its API server (the cache's watches retry on their own, silently)
// wakes the users, through wakeUsers. The first request that gets through again after an outage wakes the
// users too, so that they recover at once rather than at their next
// recheck.
func (c *Clients) detectLoss(key string, o *outage) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			// Never under the caller's locks: in goroutines.
			switch {
			case err != nil && IsUnreachable(err) && req.Context().Err() == nil:
				if !o.lost.Swap(true) {
					go c.wakeUsers(key, true)
				}
			case err == nil && o.lost.Load() && !o.back.Swap(true):
				go c.wakeUsers(key, false)
			}
			return resp, err
		})
	}
}

// outage tracks an external infra cluster's API server being out of
// reach: lost from the first request that could not reach it, back from
// the first that did after that, both until a check finds its APIs served.
type outage struct {
	lost, back atomic.Bool
}

// over ends the outage, if any, once the APIs were found served.
func (o *outage) over() {
	o.back.Store(false)
	o.lost.Store(false)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// wakeUsers tells the OnLost functions of every user of the infra cluster
// when its API server went out of reach or came back; a loss first makes
// the next Acquire ask its discovery endpoint rather than trust an earlier
// answer. Between the two, users look again every RetryUnannounced.
func (c *Clients) wakeUsers(key string, lost bool) {
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		c.mu.Unlock()
		return
	}
	if lost {
		e.apis.forget()
	}
	users := e.users.UnsortedList()
	c.mu.Unlock()
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	for _, u := range users {
		for _, f := range c.onLost {
			f(u)
		}
	}
}

type entry struct {
	infra   *Infra
	watched bool
	outage  *outage
	hash    [32]byte
	cancel  context.CancelFunc
	apis    *rememberedAPIs
	users   sets.Set[User]
}

// NewClients returns Clients for a manager; the management cluster uses the
// manager's own cache and client.
func NewClients(mgr ctrl.Manager, checker *Checker) *Clients {
	return &Clients{
		checker: checker,
		scheme:  mgr.GetScheme(),
		local: &Infra{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
			Server: mgr.GetConfig().Host, CAData: caData(mgr.GetConfig()),
		},
		entries: map[string]*entry{},
		users:   map[User]string{},
	}
}

// ForgetAPIs makes the next Acquire of every infra cluster ask its
// discovery endpoint again. Controllers call it when a KubeVirt or CDI
// CustomResourceDefinition of the management cluster changes.
func (c *Clients) ForgetAPIs() {
	c.checker.localAPIs.forget()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		e.apis.forget()
	}
}

// IsUnreachable reports whether err is a failure to reach an API server
// rather than its answer: a connection refused, reset or dropped, or a dial
// or TLS handshake that timed out. A request whose own context ended is
// not one.
func IsUnreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var opErr *net.OpError
	var netErr net.Error
	return errors.As(err, &opErr) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) && netErr.Timeout()
}

// AddWatches registers a watch function for every infra cluster, present
// and future. Register before the first Acquire.
func (c *Clients) AddWatches(w WatchFunc) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	c.watches = append(c.watches, w)
}

// Acquire returns the infra cluster src names (neither an identity nor a
// Secret: the management cluster) for the object user in namespace ns, in
// the infra namespace want names (else the default), once the
// multi-tenancy policy allows both; it records that user uses it
// (releasing whatever it used before). An error means the policy refused
// (a *tenancy.Refusal) or the kubeconfig Secret could not be used; Status
// reports an unreachable cluster or missing APIs.
func (c *Clients) Acquire(ctx context.Context, src tenancy.Source, ns string, want tenancy.Request, user User) (*Infra, error) {
	grant, err := c.checker.Policy.Decide(ctx, ns, src)
	if err != nil {
		return nil, err
	}
	ref := grant.SecretRef
	target, err := Resolve(ctx, c.checker.Reader, c.checker.Local, ref, ns, c.checker.SecretNamespaces)
	if err != nil {
		return nil, err
	}
	if target.Namespace, err = grant.Namespace(target.Namespace, want); err != nil {
		return nil, err
	}
	if !target.External {
		c.Release(user)
		infra := *c.local
		infra.Namespace, infra.Status, infra.Guest = target.Namespace, c.checker.localAPIs.check(), grant.Guest()
		return &infra, c.addWatches(&infra, &c.localWatched)
	}

	if !target.movable {
		// Without the label clusterctl move would leave the kubeconfig
		// behind (docs/move.md).
		if err := movable.KeepWithClusters(ctx, c.local.Client, target.secret, ns); err != nil {
			return nil, err
		}
	}
	key := fmt.Sprintf("%s/%s@%s", refNamespace(ref, ns), ref.Name, target.Namespace)
	e, err := c.entry(key, target, user)
	if err != nil {
		return nil, err
	}
	// Discovery goes to the network: outside the lock, so one slow infra
	// cluster does not hold up the others.
	infra := *e.infra
	infra.Status, infra.Guest = e.apis.check(), grant.Guest()
	if infra.Status.Available && e.outage != nil {
		e.outage.over()
	}
	return &infra, c.addWatches(&infra, &e.watched)
}

// entry returns the running entry for key, (re)building it when missing or
// when the kubeconfig changed, and records user as one of its users.
func (c *Clients) entry(key string, target *Target, user User) (*entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	users := sets.New[User]()
	if e != nil && e.hash != target.Hash {
		// The kubeconfig changed: start over with the new one, for the same
		// users.
		users = e.users.Clone()
		c.stop(key, e)
		e = nil
	}
	if e == nil {
		var err error
		if e, err = c.start(key, target, target.Hash); err != nil {
			return nil, err
		}
		e.users = users
		c.entries[key] = e
	}
	if c.users[user] != key {
		c.releaseLocked(user)
		c.users[user] = key
	}
	e.users.Insert(user)
	return e, nil
}

// addWatches runs the watch functions on an infra cluster once its APIs are
// served; a watch on a missing kind would never sync.
func (c *Clients) addWatches(infra *Infra, watched *bool) error {
	if !infra.Status.Available {
		return nil
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if *watched {
		return nil
	}
	for _, w := range c.watches {
		if err := w(infra); err != nil {
			return fmt.Errorf("watching infra cluster %s: %w", infra.Key, err)
		}
	}
	*watched = true
	return nil
}

func (c *Clients) start(key string, target *Target, hash [32]byte) (*entry, error) {
	cfg := rest.CopyConfig(target.Config)
	if c.WrapConfig != nil {
		c.WrapConfig(cfg)
	}
	metrics.InstrumentConfig(cfg, target.Secret.String())
	out := &outage{}
	cfg.Wrap(c.detectLoss(key, out))
	cfg.Wrap(withholdForeignBodies)
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("infra cluster %s: %w", key, err)
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: c.scheme, DefaultNamespaces: map[string]cache.Config{target.Namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("infra cluster %s: creating cache: %w", key, err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.scheme, Cache: &client.CacheOptions{
		Reader: ca, DisableFor: []client.Object{&corev1.Secret{}},
	}})
	if err != nil {
		return nil, fmt.Errorf("infra cluster %s: creating client: %w", key, err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: c.scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	metrics.InfraClusterCaches.Inc()
	go func() {
		if err := ca.Start(ctx); err != nil {
			ctrl.Log.WithName("infracluster").Error(err, "infra cluster cache stopped", "infraCluster", key)
		}
	}()
	return &entry{
		infra: &Infra{Client: cl, APIReader: direct, Cache: ca, Namespace: target.Namespace, External: true, Key: key, Secret: target.Secret,
			Server: target.Config.Host, CAData: target.Config.CAData,
			TLSServerName: target.Config.ServerName, Insecure: target.Config.Insecure},
		hash: hash, cancel: cancel, apis: &rememberedAPIs{discovery: d, ttl: apisRecheck}, users: sets.New[User](),
		outage: out,
	}, nil
}

// Release records that user no longer uses any infra cluster; an external
// cluster nobody uses any more has its cache stopped.
func (c *Clients) Release(user User) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(user)
}

func (c *Clients) releaseLocked(user User) {
	metrics.InfraClusterUsers.Forget(user.metricsKey())
	key, ok := c.users[user]
	if !ok {
		return
	}
	delete(c.users, user)
	if e := c.entries[key]; e != nil {
		e.users.Delete(user)
		if e.users.Len() == 0 {
			c.stop(key, e)
		}
	}
}

// stop stops an entry's cache; the caller holds c.mu.
func (c *Clients) stop(key string, e *entry) {
	e.cancel()
	delete(c.entries, key)
	metrics.InfraClusterCaches.Dec()
}

// caData reads the CA certificates of a configuration, which in a pod
// names the service account's CA file rather than holding it.
func caData(cfg *rest.Config) []byte {
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		ctrl.Log.WithName("infracluster").Error(err, "reading the management cluster's CA file")
	}
	return c.CAData
}

func refNamespace(ref *corev1.ObjectReference, ns string) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return ns
}
