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

// Package world builds the test world in one call: a real API server with
// every CRD, the real kube-scheduler and kube-controller-manager, the real
// KubeVirt and CDI control planes, and the simulator (package sim) playing
// their node parts on simulated infra nodes and storage. Tests, e2e specs,
// the benchmark and the sandbox all start it the same way.
package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Storage classes every world has.
const (
	// StandardClass binds immediately and is the default class.
	StandardClass = "standard"
	// WFFCClass waits for the first consumer, like most local storage.
	WFFCClass = "local-wffc"
	// CSICloneClass binds immediately and clones by CSI volume cloning,
	// as CDI does on Ceph RBD, Longhorn and most arrays (its StorageProfile
	// says csi-clone); the standard and WFFC classes copy (host-assisted):
	// their driver has no VolumeSnapshotClass.
	CSICloneClass = "csi-clone"
	// SnapshotClass binds immediately and clones by snapshot then restore:
	// its driver has a VolumeSnapshotClass (also named SnapshotClass), so
	// CDI takes a snapshot by default, as it does on a driver it knows
	// nothing else about.
	SnapshotClass = "csi-snapshot"
	// Provisioner is the simulated CSI driver of every class but
	// SnapshotClass.
	Provisioner = "csi.sim.capkv.io"
	// SnapshotProvisioner is the simulated CSI driver of SnapshotClass,
	// the one that takes snapshots.
	SnapshotProvisioner = "snapshot.csi.sim.capkv.io"
)

// Options select what the world runs.
type Options struct {
	// Sim tunes the simulator; zero means sim.DefaultOptions.
	Sim *sim.Options
	// Nodes are the infra nodes; nil means three nodes in three zones.
	Nodes []sim.NodeSpec
	// ExternalInfra starts a second API server (with its own scheduler,
	// controller-manager and nodes) as the infra cluster: KubeVirt and CDI
	// run there, Cluster API runs on the management one.
	ExternalInfra bool
	// WithCAPI runs the real Cluster API controllers and webhooks in-process
	// (core, ClusterClass and topology, kubeadm bootstrap, kubeadm control
	// plane) with in-memory workload clusters for their machines to join.
	WithCAPI bool
	// WithWorkloads starts the in-memory workload clusters without the
	// Cluster API controllers (WithCAPI implies it), for tests that play
	// Cluster API's part themselves.
	WithWorkloads bool
	// WithoutProviderCRDs leaves CAPKV's CRDs out of the management
	// cluster, for another infrastructure provider for KubeVirt (or an
	// older build of this one) to install its own.
	WithoutProviderCRDs bool
	// WithCertManager runs the real cert-manager (controller and CA
	// injector) against the management cluster, for a provider installed
	// by clusterctl.
	WithCertManager bool
	// APIServerArgs are extra flags of the management kube-apiserver, such
	// as an audit policy.
	APIServerArgs map[string]string
	// CAPIProductionDefaults runs Cluster API as its release does: its
	// ClusterCache retries an unreachable tenant after 30 s instead of the
	// world's 2 s.
	CAPIProductionDefaults bool
	// StateDir, when set, keeps the management cluster's etcd data there, so
	// that a world started again with the same StateDir resumes: objects,
	// VMs and tenant clusters (whose guests join their in-memory API
	// servers again).
	StateDir string
}

// World is a running test world.
type World struct {
	// Env is the management cluster.
	Env *testenv.Env
	// Infra is the infra cluster, where KubeVirt and CDI run: Env
	// itself unless ExternalInfra was set.
	Infra *testenv.Env
	Sim   *sim.Simulator
	// SimMetricsURL serves the simulator's counters for Prometheus.
	SimMetricsURL string
	// Workloads are the in-memory workload clusters (with WithCAPI or
	// WithWorkloads).
	Workloads *Workloads

	metrics *http.Server
	guests  *guestProxy
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan error
	capi    *capiManagers
	// extraManagers run beside the simulator's, all stopped together.
	extraManagers []ctrl.Manager
	// providerWebhooks point the provider's webhook configurations at a
	// provider started with webhooks (StartProvider).
	providerWebhooks *envtest.WebhookInstallOptions
	// managements reads every management cluster, for the guests and
	// load balancers of tenants that may have moved (StartManagement).
	managements     *managementClusters
	moreManagements []*Management
}

// DefaultNodes are three 16-CPU, 64Gi nodes in zones a, b and c, each
// with 16Gi of 2Mi hugepages and the static CPU manager, as nodes meant
// for performance VMs are set up.
func DefaultNodes() []sim.NodeSpec {
	return []sim.NodeSpec{
		{Name: "infra-a", Zone: "zone-a", CPU: "16", Memory: "64Gi", Hugepages2Mi: "16Gi", CPUManager: true},
		{Name: "infra-b", Zone: "zone-b", CPU: "16", Memory: "64Gi", Hugepages2Mi: "16Gi", CPUManager: true},
		{Name: "infra-c", Zone: "zone-c", CPU: "16", Memory: "64Gi", Hugepages2Mi: "16Gi", CPUManager: true},
	}
}

// Start builds and starts a world. On failure everything already started
// is stopped again.
func Start(o Options) (*World, error) {
	if o.StateDir != "" && o.ExternalInfra {
		return nil, errors.New("StateDir keeps the management cluster only; it cannot be combined with ExternalInfra")
	}
	env, err := testenv.Start(testenv.Options{WithKubeComponents: true, WithCAPIWebhooks: o.WithCAPI,
		WithoutProviderCRDs: o.WithoutProviderCRDs, APIServerArgs: o.APIServerArgs, EtcdDataDir: etcdDir(o.StateDir)})
	if err != nil {
		return nil, err
	}
	w := &World{Env: env, Infra: env, managements: &managementClusters{readers: []client.Reader{env.Client}}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if o.WithCertManager {
		if err := env.StartCertManager(); err != nil {
			return nil, errors.Join(err, w.Stop())
		}
	}
	if err := w.build(o); err != nil {
		return nil, errors.Join(err, w.Stop())
	}
	return w, nil
}

func etcdDir(stateDir string) string {
	if stateDir == "" {
		return ""
	}
	return filepath.Join(stateDir, "etcd")
}

func (w *World) build(o Options) error {
	var err error
	if o.ExternalInfra {
		if w.Infra, err = testenv.Start(testenv.Options{WithKubeComponents: true}); err != nil {
			w.Infra = w.Env
			return err
		}
	}
	opts := sim.DefaultOptions()
	if o.Sim != nil {
		opts = *o.Sim
	}
	w.Sim = sim.New(opts)
	if o.ExternalInfra {
		// The provider runs beside the management cluster, so its
		// connections reach the infra cluster from outside it.
		w.Sim.Provider = sim.AddressEndpoint(ManagementNodeAddress)
	}
	if o.WithCAPI || o.WithWorkloads {
		if w.Workloads, err = newWorkloads(w.ctx, w.managements); err != nil {
			return err
		}
	}
	if err := w.startSimulator(); err != nil {
		return err
	}
	if o.WithCAPI {
		if w.capi, err = startCAPI(w.Env, o.CAPIProductionDefaults); err != nil {
			return err
		}
	} else if o.WithWorkloads {
		// Machines made by hand take addresses from pools all the same.
		if err := w.Env.StartIPAM(); err != nil {
			return err
		}
	}
	if err := w.serveMetrics(); err != nil {
		return err
	}
	// Pods the world runs (an installed provider) reach the guests'
	// sshd through this proxy only.
	if w.guests, err = startGuestProxy(w.ctx, w.Sim.DialGuest); err != nil {
		return err
	}
	w.Env.GuestProxy = w.guests.Addr()
	ctx := context.Background()
	nodes := o.Nodes
	if nodes == nil {
		nodes = DefaultNodes()
	}
	nodes = slices.Clone(nodes)
	for i := range nodes {
		// Node ports are served on these, as kube-proxy serves them.
		if nodes[i].Address == "" {
			nodes[i].Address = w.Infra.NodeAddress(i)
		}
	}
	if err := sim.CreateNodes(ctx, w.Infra.Client, nodes...); err != nil {
		return err
	}
	if err := createStorageClasses(ctx, w.Infra); err != nil {
		return err
	}
	for _, driver := range []string{Provisioner, SnapshotProvisioner} {
		if err := createCSIDriver(ctx, w.Infra, driver); err != nil {
			return err
		}
	}
	return createSnapshotClass(ctx, w.Infra)
}

// createCSIDriver registers the simulated driver as a CSI driver's
// deployment does. CDI fills claims of a class whose driver is registered
// through its volume populators, and picks smart clones there
// (docs/simulator.md#cdis-pods). The driver needs no attach step.
func createCSIDriver(ctx context.Context, env *testenv.Env, name string) error {
	driver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}
	if err := env.Client.Create(ctx, driver); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating CSIDriver %s: %w", name, err)
	}
	return nil
}

// createSnapshotClass gives SnapshotProvisioner its VolumeSnapshotClass,
// the driver's default, deleting snapshots with their VolumeSnapshots.
func createSnapshotClass(ctx context.Context, env *testenv.Env) error {
	class := &snapshotv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: SnapshotClass,
			Annotations: map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}},
		Driver: SnapshotProvisioner, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
	}
	if err := env.Client.Create(ctx, class); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating VolumeSnapshotClass %s: %w", class.Name, err)
	}
	return nil
}

// startSimulator runs KubeVirt's control plane on the infra cluster, then
// the simulator (the node agents, the guests and CDI) in its own manager.
func (w *World) startSimulator() error {
	if err := w.Infra.StartKubeVirt(w.ctx); err != nil {
		return fmt.Errorf("starting KubeVirt: %w", err)
	}
	if err := w.Infra.StartCDI(w.ctx); err != nil {
		return fmt.Errorf("starting CDI: %w", err)
	}
	handlerConfig, err := w.Infra.KubeVirtHandlerConfig()
	if err != nil {
		return err
	}
	handler, err := client.New(handlerConfig, client.Options{Scheme: w.Infra.Scheme})
	if err != nil {
		return err
	}
	// Its writes show in managedFields as the simulated virt-handler's.
	handler = client.WithFieldOwner(handler, "sim-virt-handler")
	mgr, err := ctrl.NewManager(w.Infra.Config, ctrl.Options{
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Scheme:                 w.Infra.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := w.Sim.SetupWithManager(mgr, handler); err != nil {
		return err
	}
	if w.Workloads != nil {
		w.Workloads.runCloudControllers(newCloudController(w.Sim, w.Infra.Client, w.Infra.Scheme))
		w.Sim.Joiner = &vmJoiner{mgmt: w.managements, infra: w.Infra.Client, workloads: w.Workloads, network: w.Sim}
		w.Sim.LBBackend = &lbBackend{workloads: w.Workloads}
		infraMgr := mgr
		if w.Infra != w.Env {
			// The test-only machines live on the management cluster.
			if infraMgr, err = ctrl.NewManager(w.Env.Config, ctrl.Options{Scheme: w.Env.Scheme,
				Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
				Metrics:    metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}); err != nil {
				return err
			}
			w.extraManagers = append(w.extraManagers, infraMgr)
		}
		if err := (&testInfra{client: infraMgr.GetClient(), workloads: w.Workloads}).setup(infraMgr); err != nil {
			return err
		}
	}
	managers := append([]ctrl.Manager{mgr}, w.extraManagers...)
	w.stopped = make(chan error, len(managers))
	for _, m := range managers {
		go func() { w.stopped <- m.Start(w.ctx) }()
	}
	return nil
}

func createStorageClasses(ctx context.Context, env *testenv.Env) error {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: StandardClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: Provisioner, VolumeBindingMode: &immediate, AllowVolumeExpansion: ptr.To(true)},
		{ObjectMeta: metav1.ObjectMeta{Name: WFFCClass}, Provisioner: Provisioner, VolumeBindingMode: &wffc, AllowVolumeExpansion: ptr.To(true)},
		{ObjectMeta: metav1.ObjectMeta{Name: CSICloneClass, Annotations: map[string]string{"cdi.kubevirt.io/clone-strategy": "csi-clone"}},
			Provisioner: Provisioner, VolumeBindingMode: &immediate, AllowVolumeExpansion: ptr.To(true)},
		{ObjectMeta: metav1.ObjectMeta{Name: SnapshotClass}, Provisioner: SnapshotProvisioner, VolumeBindingMode: &immediate, AllowVolumeExpansion: ptr.To(true)},
	} {
		if err := env.Client.Create(ctx, sc); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating storage class %s: %w", sc.Name, err)
		}
	}
	return nil
}

// ComponentExits lists the world's components (virt-controller,
// cdi-controller, ...) that exited and were started again, on the
// management cluster and on a separate infra cluster.
func (w *World) ComponentExits() []string {
	exits := w.Env.ComponentExits()
	if w.Infra != w.Env {
		exits = append(exits, w.Infra.ComponentExits()...)
	}
	return exits
}

// Stop stops the simulator, the kube components, the API server and etcd.
func (w *World) Stop() error {
	var errs []error
	for _, m := range w.moreManagements {
		errs = append(errs, m.stop())
	}
	if w.capi != nil {
		errs = append(errs, w.capi.stop())
	}
	if w.cancel != nil {
		w.cancel()
	}
	if w.stopped != nil {
		for range 1 + len(w.extraManagers) {
			if err := <-w.stopped; err != nil {
				errs = append(errs, fmt.Errorf("simulator: %w", err))
			}
		}
		errs = append(errs, w.Sim.Close())
	}
	if w.metrics != nil {
		errs = append(errs, w.metrics.Close())
	}
	if w.guests != nil {
		w.guests.Stop()
	}
	if w.providerWebhooks != nil {
		errs = append(errs, w.providerWebhooks.Cleanup())
	}
	if w.Workloads != nil {
		// Open tenant API connections drain when their proxies close.
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, w.Workloads.shutdown(shutdown))
		cancel()
	}
	if w.Infra != nil && w.Infra != w.Env {
		errs = append(errs, w.Infra.Stop())
	}
	if w.Env != nil {
		errs = append(errs, w.Env.Stop())
	}
	return errors.Join(errs...)
}

// serveMetrics serves the simulator's counters on a free loopback port.
func (w *World) serveMetrics() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	w.metrics = &http.Server{Handler: w.Sim.Counters.Handler(), ReadHeaderTimeout: 5 * time.Second}
	w.SimMetricsURL = "http://" + l.Addr().String() + "/metrics"
	go func() { _ = w.metrics.Serve(l) }()
	return nil
}
