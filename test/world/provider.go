package world

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/manager"
)

// ProviderNamespace is where the world's provider manager pretends to run.
const ProviderNamespace = "capkv-system"

// StartProvider runs the provider's manager against the world's management
// cluster, built by manager.New exactly as main.go builds it, with o on top
// of the world's defaults: no webhooks (the world's API server serves Cluster
// API's), no metrics listener, a free health port, the simulated guests'
// SSH. It returns a function that stops the manager and waits for it.
func (w *World) StartProvider(o manager.Options) (func() error, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	o.HealthProbeBindAddress = addr
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.SkipNameValidation = true
	if o.SyncPeriod == 0 {
		o.SyncPeriod = 10 * time.Hour
	}
	if o.SSHDial == nil {
		o.SSHDial = w.Sim.DialGuest
	}
	if o.ProviderNamespace == "" {
		o.ProviderNamespace = ProviderNamespace
	}
	if o.IsolationIPFamilies == nil {
		o.IsolationIPFamilies = []string{"IPv4"}
	}
	for _, n := range []*int{&o.KubevirtClusterConcurrency, &o.KubevirtMachineConcurrency, &o.KubevirtMachineTemplateConcurrency, &o.GoldenImageConcurrency} {
		if *n == 0 {
			*n = 4
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, w.Env.Config, o)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the provider's manager: %w", err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-stopped
	}, nil
}

// AdminUser is the user of the world's admin kubeconfig.
const AdminUser = "world-admin"

// WriteKubeconfig writes a kubeconfig of the management cluster to path
// that authenticates as user, a cluster administrator: for kubectl,
// clusterctl, or a provider running as its own process whose requests the
// API server's audit log can tell apart by that name.
func (w *World) WriteKubeconfig(path, userName string) error {
	user, err := w.Env.ControlPlane.AddUser(envtest.User{Name: userName, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
