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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1" //nolint:staticcheck // the ClusterResourceSet webhooks convert it
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1" //nolint:staticcheck // v1beta1 manifests must still convert
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1" //nolint:staticcheck // v1beta1 manifests must still convert
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // v1beta1 manifests must still convert
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1"  //nolint:staticcheck // the conversion webhooks serve the old versions, as in Cluster API's own scheme
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"    //nolint:staticcheck // see above
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1" //nolint:staticcheck // the ExtensionConfig conversion webhook serves the old version
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/scheme"
)

// ContractLabels are the labels that map Cluster API contracts to CAPKV API
// versions; kustomize adds them in config/crd, the environment adds them
// here.
var ContractLabels = map[string]string{
	"cluster.x-k8s.io/v1beta1": "v1alpha1",
	"cluster.x-k8s.io/v1beta2": "v1alpha1",
}

// ClusterctlLabel and ProviderLabel are the labels clusterctl puts on
// everything it installs, CRDs included: clusterctl move discovers the kinds
// to move by the first.
const (
	ClusterctlLabel = "clusterctl.cluster.x-k8s.io"
	ProviderLabel   = "cluster.x-k8s.io/provider"
)

// CRDWait bounds the wait for installed CRDs to be served. envtest's
// default of 10 s is too short for an API server that shares 2 cores with
// other test packages' worlds; the wait ends as soon as they are served.
const CRDWait = 2 * time.Minute

// capiProviders are the directories of Cluster API's CRDs in its module, by
// the provider (clusterctl's manifest label) that installs them.
var capiProviders = map[string]string{
	"core":                 "cluster-api",
	"bootstrap/kubeadm":    "bootstrap-kubeadm",
	"controlplane/kubeadm": "control-plane-kubeadm",
}

// Options selects what the environment installs.
type Options struct {
	// WithoutKubeVirtCRDs leaves out the KubeVirt, CDI and Multus CRDs, as on
	// an infra cluster where KubeVirt is not installed.
	WithoutKubeVirtCRDs bool
	// WithKubeComponents starts the real kube-scheduler and
	// kube-controller-manager too.
	WithKubeComponents bool
	// WithCAPIWebhooks installs Cluster API's admission webhooks and points
	// the conversion of every CRD at the local serving host, port and
	// certificates in Environment.WebhookInstallOptions, for an in-process
	// webhook server to serve. It excludes WithCAPKVWebhooks.
	WithCAPIWebhooks bool
	// WithCAPKVWebhooks installs CAPKV's webhook configurations, pointed at
	// the local serving host, port and certificates in
	// Environment.WebhookInstallOptions.
	WithCAPKVWebhooks bool
	// WithoutProviderCRDs leaves out CAPKV's CRDs, so that another
	// infrastructure provider for KubeVirt can install its own.
	WithoutProviderCRDs bool
	// APIServerArgs are extra kube-apiserver flags (name without dashes).
	APIServerArgs map[string]string
	// EtcdDataDir, when set, is etcd's data directory, kept after Stop: a
	// later Start with the same directory finds every object again.
	EtcdDataDir string
}

// Env is a running API server with the CRDs installed.
type Env struct {
	*envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client with the full scheme.
	Client client.Client
	// Scheme has every kind of the test world.
	Scheme *runtime.Scheme
	// ServiceCIDR is the range of Service ClusterIPs, on loopback.
	ServiceCIDR string
	// PodCIDR is the loopback range for the pods the world runs as real
	// processes.
	PodCIDR string
	// GuestProxy, when set, is the SOCKS5 address through which those
	// pods reach the simulated guests (world.PodRunner gives it to them as
	// ALL_PROXY): pods here share the host's network, which has no route
	// to the guests' addresses.
	GuestProxy string

	services *serviceRange
	// certsDir holds the certificates of the API server's aggregation
	// layer (KubeVirt's are in the components' directory).
	certsDir string

	processes     []*process
	componentsDir string
	// killAPIServer is set when the environment keeps no data: its API
	// server is killed when it does not stop within the stop timeout.
	killAPIServer bool
	// stopProfiling ends the API server's CPU profiles (ProfileDirEnv).
	stopProfiling func()
}

// Start starts etcd and kube-apiserver from BinDir and installs the CRDs.
func Start(o Options) (*Env, error) {
	bin := BinDir()
	if err := checkBinaries(bin, "kube-apiserver", "etcd"); err != nil {
		return nil, err
	}
	crds, err := CRDs(!o.WithoutKubeVirtCRDs)
	if err != nil {
		return nil, err
	}
	if o.WithoutProviderCRDs {
		ours, err := readCRDs(filepath.Join(RepoRoot(), "config", "crd", "bases"))
		if err != nil {
			return nil, err
		}
		crds = slices.DeleteFunc(crds, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			return slices.ContainsFunc(ours, func(o *apiextensionsv1.CustomResourceDefinition) bool { return o.Name == crd.Name })
		})
	}
	s := NewScheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDs:                     crds,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: CRDWait},
		Scheme:                   s,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		AttachControlPlaneOutput: os.Getenv("TESTENV_VERBOSE") != "",
	}
	if o.EtcdDataDir == "" {
		// Nothing is kept: an API server that still serves the watches of
		// a client that outlives it (a provider's ClusterCache connected
		// to a tenant) waits about 45 s for them on SIGTERM; end it sooner.
		env.ControlPlaneStopTimeout = 5 * time.Second
	}
	if o.EtcdDataDir != "" {
		if err := os.MkdirAll(o.EtcdDataDir, 0o700); err != nil {
			return nil, err
		}
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: o.EtcdDataDir}
		// envtest's etcd skips fsync for speed; kept data must survive a
		// crash of the machine too.
		env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "false")
	}
	if o.WithCAPIWebhooks && o.WithCAPKVWebhooks {
		return nil, errors.New("WithCAPIWebhooks and WithCAPKVWebhooks need separate servers; install CAPKV's with InstallProviderWebhooks")
	}
	if o.WithCAPIWebhooks {
		if env.WebhookInstallOptions, err = capiWebhookInstallOptions(); err != nil {
			return nil, err
		}
	}
	if o.WithCAPKVWebhooks {
		env.WebhookInstallOptions.Paths = []string{ProviderWebhookManifests()}
	}
	// envtest turns the ServiceAccount admission plugin off; a real API
	// server runs it, and it gives every pod the default ServiceAccount's
	// token volume, which virt-controller counts on an attachment pod
	// (kubevirt volume-hotplug.go, podVolumesMatchesReadyVolumes).
	env.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins")
	// virt-api is an aggregated API server: it needs the aggregation layer.
	certsDir, err := os.MkdirTemp("", "capkv-apiserver-certs-")
	if err != nil {
		return nil, err
	}
	aggregation, err := frontProxyFlags(certsDir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certsDir))
	}
	for name, value := range aggregation {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	audit, err := auditFlags(certsDir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certsDir))
	}
	for name, value := range audit {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	for name, value := range o.APIServerArgs {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	stateFile := ""
	if o.EtcdDataDir != "" {
		stateFile = filepath.Join(filepath.Dir(o.EtcdDataDir), "service-cidr")
	}
	services, err := claimServiceRange(stateFile)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certsDir))
	}
	// A flag of the caller's APIServerArgs wins.
	if _, ok := o.APIServerArgs["service-cluster-ip-range"]; !ok {
		env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", services.cidr)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting kube-apiserver and etcd: %w", err), services.release(), os.RemoveAll(certsDir))
	}
	if !o.WithoutKubeVirtCRDs {
		if err := installKubeVirtCRDs(cfg); err != nil {
			return nil, errors.Join(err, env.Stop(), services.release(), os.RemoveAll(certsDir))
		}
	}
	// Tests create many objects quickly; the default client limits would
	// make them wait on the client, not on the server.
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Join(err, env.Stop(), services.release(), os.RemoveAll(certsDir))
	}
	if err := installTenantCloudRoles(context.Background(), c); err != nil {
		return nil, errors.Join(err, env.Stop(), services.release(), os.RemoveAll(certsDir))
	}
	e := &Env{Environment: env, Config: cfg, Client: c, Scheme: s, ServiceCIDR: services.cidr, PodCIDR: services.podCIDR, services: services, certsDir: certsDir,
		stopProfiling: profileAPIServer(cfg), killAPIServer: o.EtcdDataDir == ""}
	if o.WithKubeComponents {
		if err := e.StartKubeComponents(); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// Stop stops the components it started (KubeVirt's, the scheduler and the
// controller-manager), then the API server and etcd, and removes their data.
func (e *Env) Stop() error {
	e.stopProfiling()
	components := e.stopProcesses()
	controlPlane := e.Environment.Stop()
	if e.killAPIServer {
		controlPlane = withoutAPIServerKill(controlPlane)
	}
	return errors.Join(components, controlPlane, e.services.release(), os.RemoveAll(e.certsDir))
}

// withoutAPIServerKill drops from envtest's stop errors the API server's
// kill after the stop timeout: envtest reports it as an error ("timeout
// waiting for process kube-apiserver to stop", or "unable to kill" when
// the server exited as the timeout fired), but an environment that keeps
// nothing asks for it. A loaded machine's API server, still serving its
// clients' watches, takes longer than the timeout to drain.
func withoutAPIServerKill(err error) error {
	if err == nil {
		return nil
	}
	var agg kerrors.Aggregate
	if !errors.As(err, &agg) {
		return err
	}
	var kept []error
	for _, e := range agg.Errors() {
		msg := e.Error()
		if strings.Contains(msg, "kube-apiserver") &&
			(strings.HasPrefix(msg, "timeout waiting for process") || errors.Is(e, syscall.ESRCH)) {
			continue
		}
		kept = append(kept, e)
	}
	return kerrors.NewAggregate(kept)
}

// CRDs reads the CRDs of the test world that envtest installs: CAPKV's with
// the contract labels, Cluster API's, and, when withKubeVirt is set, CDI's,
// Multus's and the snapshot ones. KubeVirt's own come from its install set
// (installKubeVirtCRDs).
func CRDs(withKubeVirt bool) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	root := RepoRoot()
	ours, err := readCRDs(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		return nil, err
	}
	for _, crd := range ours {
		addLabels(crd, ContractLabels)
	}
	all := ours
	capi, err := ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	for dir, provider := range capiProviders {
		crds, err := readCRDs(filepath.Join(capi, dir, "config", "crd", "bases"))
		if err != nil {
			return nil, err
		}
		// clusterctl labels what it installs; move finds its kinds by these.
		for _, crd := range crds {
			addLabels(crd, map[string]string{ClusterctlLabel: "", ProviderLabel: provider})
		}
		if dir != "core" {
			// The kubeadm providers' kustomizations add these contract labels.
			for _, crd := range crds {
				addLabels(crd, map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"})
			}
		}
		all = append(all, crds...)
	}
	ipam, err := ipamCRDs()
	if err != nil {
		return nil, err
	}
	all = append(all, ipam...)
	if withKubeVirt {
		crds, err := readCRDs(filepath.Join(root, "test", "crds"))
		if err != nil {
			return nil, err
		}
		all = append(all, crds...)
	}
	return all, nil
}

func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f) //nolint:gosec // CRD files of this repository and the module cache
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", f, err)
		}
		dropDuplicateVersions(crd)
		crds = append(crds, crd)
	}
	return crds, nil
}

// dropDuplicateVersions keeps the first of several versions with one name.
// CDI's own package marks DataImportCron as a CRD root without a status
// subresource; controller-gen then emits it next to our wrapper (which has
// the subresource, as the CRD CDI installs does), under the same version.
func dropDuplicateVersions(crd *apiextensionsv1.CustomResourceDefinition) {
	seen := map[string]bool{}
	kept := crd.Spec.Versions[:0]
	for _, v := range crd.Spec.Versions {
		if !seen[v.Name] {
			kept = append(kept, v)
		}
		seen[v.Name] = true
	}
	crd.Spec.Versions = kept
}

// InstallCRDsOf installs the test world's third-party CRDs of the given API
// groups (for example "kubevirt.io") into a running environment and waits
// until they are served, as when KubeVirt is installed on an infra cluster
// after the provider.
func (e *Env) InstallCRDsOf(groups ...string) error {
	selected, err := thirdPartyCRDs(groups)
	if err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: selected, MaxTime: CRDWait})
	return err
}

func thirdPartyCRDs(groups []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := readCRDs(filepath.Join(RepoRoot(), "test", "crds"))
	if err != nil {
		return nil, err
	}
	kv, err := kubeVirtCRDs()
	if err != nil {
		return nil, err
	}
	all = append(all, kv...)
	var selected []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		for _, g := range groups {
			if crd.Spec.Group == g {
				selected = append(selected, crd)
			}
		}
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("no CRDs of groups %v in test/crds or KubeVirt's install set", groups)
	}
	return selected, nil
}

func yamlOf(obj map[string]any) ([]byte, error) { return yaml.Marshal(obj) }

func addLabels(crd *apiextensionsv1.CustomResourceDefinition, labels map[string]string) {
	if crd.Labels == nil {
		crd.Labels = map[string]string{}
	}
	for k, v := range labels {
		crd.Labels[k] = v
	}
}

// NewScheme is the provider's scheme plus the kinds of the kubeadm
// providers and the older Cluster API versions, which the test world's
// Cluster API controllers and converters need.
func NewScheme() *runtime.Scheme {
	s := scheme.New()
	for _, add := range []func(*runtime.Scheme) error{
		clusterv1beta1.AddToScheme, bootstrapv1.AddToScheme, bootstrapv1beta1.AddToScheme,
		controlplanev1.AddToScheme, controlplanev1beta1.AddToScheme, runtimev1.AddToScheme, runtimev1alpha1.AddToScheme, addonsv1.AddToScheme, addonsv1beta1.AddToScheme, ipamv1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1alpha1.AddToScheme,
		snapshotv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}
