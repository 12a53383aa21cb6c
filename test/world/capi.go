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
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	bootstrapsetup "sigs.k8s.io/cluster-api/bootstrap/kubeadm/setup"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	controlplanesetup "sigs.k8s.io/cluster-api/controlplane/kubeadm/setup"
	controlplaneadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	controlplaneconversion "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/conversion"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourceset"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourcesetbinding"
	"sigs.k8s.io/cluster-api/core/reconcilers/extensionconfig"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	coresetup "sigs.k8s.io/cluster-api/core/setup"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	coreconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// contractVersion finds the API version implementing the current contract
// for a group and kind from its CRD's contract label, as Cluster API does:
// it reads only the CRD's metadata, by the name the contract gives it.
// Reading whole CRDs would deep-copy every schema of the cache on every
// object converted, which once cost more than half of the e2e suite's CPU.
func contractVersion(c client.Reader) func(context.Context, schema.GroupKind) (string, error) {
	return func(ctx context.Context, gk schema.GroupKind) (string, error) {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Get(ctx, client.ObjectKey{Name: contract.CalculateCRDName(gk.Group, gk.Kind)}, crd); err != nil {
			return "", fmt.Errorf("no CRD for %s: %w", gk, err)
		}
		versions := strings.Split(crd.Labels[clusterv1.GroupVersion.Group+"/"+clusterv1.GroupVersion.Version], "_")
		if v := versions[len(versions)-1]; v != "" {
			return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
		}
		return "", fmt.Errorf("CRD %s has no contract label for %s", crd.Name, clusterv1.GroupVersion.Version)
	}
}

// capiManagers are the in-process Cluster API controllers: core, the kubeadm
// bootstrap provider and the kubeadm control plane, each in its own manager
// as in a real installation. The core manager serves every Cluster API
// webhook at the address testenv configured for them.
type capiManagers struct {
	cancel  context.CancelFunc
	stopped []chan error
}

// capiStarts counts the Cluster API starts of this process, see startCAPI.
var capiStarts atomic.Int32

// connectionRetryInterval is how soon the world's Cluster API controllers
// retry a tenant API server that refused them.
const connectionRetryInterval = 2 * time.Second

// startCAPI runs Cluster API's core, kubeadm bootstrap and kubeadm control
// plane managers against env. Their informer names are taken for the life
// of the process (Cluster API gives no way to release them), so every
// start after the first, a further management cluster's or a later
// world's (the benchmark starts two), carries a suffix. The feature gates
// are those a user of the topology and ignition flavors, of in-place
// updates and of machine taints turns on (CLUSTER_TOPOLOGY,
// EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION, EXP_RUNTIME_SDK,
// EXP_IN_PLACE_UPDATES and EXP_MACHINE_TAINT_PROPAGATION before clusterctl
// init); the kubeadm webhooks check the Ignition one, the Runtime SDK's
// controllers call extensions through the world's runtimeClient, and
// Cluster API's rollout specs set taints on Machines. productionDefaults
// keeps Cluster API's own ClusterCache retry.
func startCAPI(env *testenv.Env, productionDefaults bool) (*capiManagers, error) {
	suffix := ""
	if n := capiStarts.Add(1); n > 1 {
		suffix = fmt.Sprintf("-%d", n)
	}
	if err := feature.MutableGates.Set("ClusterTopology=true,KubeadmBootstrapFormatIgnition=true,RuntimeSDK=true,InPlaceUpdates=true,MachineTaintPropagation=true"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &capiManagers{cancel: cancel}
	fail := func(err error) (*capiManagers, error) { return nil, errors.Join(err, m.stop()) }
	wh := env.WebhookInstallOptions
	s := env.Scheme
	type setupFn func(context.Context, ctrl.Manager, clustercache.ClusterCache) error
	for _, p := range []struct {
		name    string
		cache   func() ctrl.Options
		cc      clustercache.CacheOptions
		client  func(name string, qps float32, burst int) clustercache.ClientOptions
		setup   setupFn
		webhook bool
	}{
		{"capi-controller-manager", func() ctrl.Options {
			return ctrl.Options{Cache: coresetup.ManagerCacheOptions(s, "capi-controller-manager"+suffix, "", 10*time.Minute), Client: coresetup.ManagerClientOptions()}
		}, coresetup.ClusterCacheCacheOptions(), coresetup.ClusterCacheClientOptions, setupCore, true},
		{"capi-kubeadm-bootstrap-controller-manager", func() ctrl.Options {
			return ctrl.Options{Cache: bootstrapsetup.ManagerCacheOptions(s, "capi-kubeadm-bootstrap-controller-manager"+suffix, "", 10*time.Minute), Client: bootstrapsetup.ManagerClientOptions()}
		}, bootstrapsetup.ClusterCacheCacheOptions(), bootstrapsetup.ClusterCacheClientOptions, setupBootstrap, false},
		{"capi-kubeadm-control-plane-controller-manager", func() ctrl.Options {
			return ctrl.Options{Cache: controlplanesetup.ManagerCacheOptions(s, "capi-kubeadm-control-plane-controller-manager"+suffix, "", 10*time.Minute), Client: controlplanesetup.ManagerClientOptions()}
		}, controlplanesetup.ClusterCacheCacheOptions(), controlplanesetup.ClusterCacheClientOptions, setupControlPlane, false},
	} {
		opts := p.cache()
		opts.Scheme = s
		opts.Metrics = metricsserver.Options{BindAddress: "0"}
		opts.HealthProbeBindAddress = "0"
		skip := true
		opts.Controller.SkipNameValidation = &skip
		if p.webhook {
			opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir})
		}
		mgr, err := ctrl.NewManager(env.Config, opts)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", p.name, err))
		}
		if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
			return fail(err)
		}
		secretClient, err := coresetup.CreateSecretCachingClient(mgr)
		if err != nil {
			return fail(err)
		}
		cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
			SecretClient: secretClient, Cache: p.cc,
			// As each component's main.go sets it: among others, Pods are
			// read uncached, as drain lists them by node name.
			Client: p.client(p.name, 50, 100),
		}, controller.Options{MaxConcurrentReconciles: 10})
		if err != nil {
			return fail(err)
		}
		// A tenant API server answers only once its control-plane VM
		// "boots", so the first connection is refused; the 30 s default
		// retry would then hold every cluster's Nodes back by up to 30 s.
		// Cluster API's own suites (core/reconcilers/machine, cluster,
		// machinehealthcheck) set 2 s the same way; health checks and rate
		// limits keep their defaults.
		if !productionDefaults {
			cc.(interface{ SetConnectionCreationRetryInterval(time.Duration) }).SetConnectionCreationRetryInterval(connectionRetryInterval)
		}
		if err := p.setup(ctx, mgr, cc); err != nil {
			return fail(fmt.Errorf("%s: %w", p.name, err))
		}
		if p.webhook {
			if err := setupCAPIWebhooks(mgr, cc); err != nil {
				return fail(err)
			}
		}
		stopped := make(chan error, 1)
		m.stopped = append(m.stopped, stopped)
		go func() { stopped <- mgr.Start(ctx) }()
	}
	// clusterctl init --ipam in-cluster installs it next to Cluster API.
	if err := env.StartIPAM(); err != nil {
		return fail(err)
	}
	return m, nil
}

func concurrency(n int) controller.Options { return controller.Options{MaxConcurrentReconciles: n} }

func setupCore(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	c, r := mgr.GetClient(), mgr.GetAPIReader()
	rc, err := newRuntimeClient(c)
	if err != nil {
		return err
	}
	// A metadata-only Secret cache, as Cluster API's main.go gives the
	// ClusterResourceSet and ExtensionConfig controllers (core/main.go).
	secrets, err := ctrlcache.New(mgr.GetConfig(), ctrlcache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(), DefaultTransform: ctrlcache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	if err := mgr.Add(secrets); err != nil {
		return err
	}
	return errors.Join(
		(&clusterclass.Reconciler{Client: c, RuntimeClient: rc}).SetupWithManager(ctx, mgr, concurrency(5)),
		(&topologycluster.Reconciler{Client: c, APIReader: r, ClusterCache: cc, RuntimeClient: rc}).SetupWithManager(ctx, mgr, concurrency(5)),
		(&topologymachinedeployment.Reconciler{Client: c, APIReader: r}).SetupWithManager(ctx, mgr, concurrency(5)),
		(&topologymachineset.Reconciler{Client: c, APIReader: r}).SetupWithManager(ctx, mgr, concurrency(5)),
		(&cluster.Reconciler{Client: c, APIReader: r, ClusterCache: cc, RemoteConnectionGracePeriod: 50 * time.Second}).SetupWithManager(ctx, mgr, concurrency(10)),
		(&machine.Reconciler{Client: c, APIReader: r, ClusterCache: cc, RuntimeClient: rc, RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, concurrency(10)),
		(&machineset.Reconciler{Client: c, APIReader: r, ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(10)),
		(&machinedeployment.Reconciler{Client: c, APIReader: r, RuntimeClient: rc}).SetupWithManager(ctx, mgr, concurrency(10)),
		(&machinehealthcheck.Reconciler{Client: c, ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(10)),
		(&clusterresourceset.Reconciler{Client: c, ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(10), secrets),
		(&clusterresourcesetbinding.Reconciler{Client: c}).SetupWithManager(ctx, mgr, concurrency(10)),
		// MachinePools are on by default (feature gate MachinePool, beta).
		(&machinepool.Reconciler{Client: c, APIReader: r, ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(10)),
		(&extensionconfig.Reconciler{Client: c, APIReader: r, RuntimeClient: rc, PartialSecretCache: secrets}).SetupWithManager(ctx, mgr, concurrency(10)),
	)
}

func setupBootstrap(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	secretClient, err := bootstrapsetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	return (&kubeadmconfig.Reconciler{Client: mgr.GetClient(), SecretCachingClient: secretClient, APIReader: mgr.GetAPIReader(),
		ClusterCache: cc, TokenTTL: 15 * time.Minute}).SetupWithManager(ctx, mgr, concurrency(10))
}

func setupControlPlane(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	secretClient, err := controlplanesetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	// The control plane provider keeps a registry of its own, read only,
	// as its main.go does.
	rc, err := newRuntimeClient(mgr.GetClient())
	if err != nil {
		return err
	}
	return errors.Join(
		(&extensionconfig.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RuntimeClient: rc, ReadOnly: true}).
			SetupWithManager(ctx, mgr, concurrency(10)),
		(&kubeadmcontrolplane.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SecretCachingClient: secretClient,
			ClusterCache: cc, EtcdDialTimeout: 10 * time.Second, EtcdCallTimeout: 15 * time.Second, RuntimeClient: rc,
			RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, concurrency(10)),
	)
}

// setupCAPIWebhooks registers every Cluster API admission and conversion
// webhook on the core manager's server.
func setupCAPIWebhooks(mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	coreconversion.SetAPIVersionGetter(contractVersion(mgr.GetClient()))
	controlplaneconversion.SetAPIVersionGetter(contractVersion(mgr.GetClient()))
	c := mgr.GetClient()
	return errors.Join(
		(&coreadmission.ClusterClass{Client: c}).SetupWebhookWithManager(mgr),
		(&coreadmission.Cluster{Client: c, ClusterCacheReader: cc}).SetupWebhookWithManager(mgr),
		(&coreadmission.Machine{}).SetupWebhookWithManager(mgr),
		(&coreadmission.MachineSet{}).SetupWebhookWithManager(mgr),
		(&coreadmission.MachineDeployment{}).SetupWebhookWithManager(mgr),
		(&coreadmission.MachinePool{}).SetupWebhookWithManager(mgr),
		(&coreadmission.MachineDrainRule{}).SetupWebhookWithManager(mgr),
		(&coreadmission.MachineHealthCheck{}).SetupWebhookWithManager(mgr),
		(&coreadmission.ClusterResourceSet{}).SetupWebhookWithManager(mgr),
		(&coreadmission.ClusterResourceSetBinding{}).SetupWebhookWithManager(mgr),
		(&coreadmission.ExtensionConfig{}).SetupWebhookWithManager(mgr),
		(&coreadmission.IPAddress{Client: c}).SetupWebhookWithManager(mgr),
		(&coreadmission.IPAddressClaim{}).SetupWebhookWithManager(mgr),
		(&bootstrapadmission.KubeadmConfig{}).SetupWebhookWithManager(mgr),
		(&bootstrapadmission.KubeadmConfigTemplate{}).SetupWebhookWithManager(mgr),
		(&controlplaneadmission.KubeadmControlPlane{}).SetupWebhookWithManager(mgr),
		(&controlplaneadmission.ScaleValidator{Client: c}).SetupWebhookWithManager(mgr),
		(&controlplaneadmission.KubeadmControlPlaneTemplate{}).SetupWebhookWithManager(mgr),
	)
}

func (m *capiManagers) stop() error {
	m.cancel()
	var errs []error
	for _, s := range m.stopped {
		if err := <-s; err != nil {
			errs = append(errs, err)
		}
	}
	m.stopped = nil
	return errors.Join(errs...)
}
