// Package world builds the test world in one call: a real API server with
// every CRD, the real kube-scheduler and kube-controller-manager, simulated
// infra nodes and storage, and the KubeVirt/CDI simulator with its admission
// webhook. Tests, e2e specs, the benchmark and the sandbox all start it the
// same way.
package world

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/capkv/cluster-api-provider-kubevirt/test/sim"
	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// Storage classes every world has.
const (
	// StandardClass binds immediately and is the default class.
	StandardClass = "standard"
	// WFFCClass waits for the first consumer, like most local storage.
	WFFCClass = "local-wffc"
	// Provisioner is the simulated CSI driver of both classes.
	Provisioner = "csi.sim.capkv.io"
)

// Options select what the world runs.
type Options struct {
	// Sim tunes the simulator; zero means sim.DefaultOptions.
	Sim *sim.Options
	// Nodes are the infra nodes; nil means three nodes in three zones.
	Nodes []sim.NodeSpec
}

// World is a running test world.
type World struct {
	Env *testenv.Env
	Sim *sim.Simulator

	cancel  context.CancelFunc
	stopped chan error
}

// DefaultNodes are three 16-CPU, 64Gi nodes in zones a, b and c.
func DefaultNodes() []sim.NodeSpec {
	return []sim.NodeSpec{
		{Name: "infra-a", Zone: "zone-a", CPU: "16", Memory: "64Gi"},
		{Name: "infra-b", Zone: "zone-b", CPU: "16", Memory: "64Gi"},
		{Name: "infra-c", Zone: "zone-c", CPU: "16", Memory: "64Gi"},
	}
}

// Start builds and starts a world.
func Start(o Options) (w *World, err error) {
	env, err := testenv.Start(testenv.Options{WithKubeComponents: true})
	if err != nil {
		return nil, err
	}
	w = &World{Env: env}
	defer func() {
		if err != nil {
			_ = w.Stop()
		}
	}()
	opts := sim.DefaultOptions()
	if o.Sim != nil {
		opts = *o.Sim
	}
	w.Sim = sim.New(opts)
	if err := w.startSimulator(); err != nil {
		return nil, err
	}
	ctx := context.Background()
	nodes := o.Nodes
	if nodes == nil {
		nodes = DefaultNodes()
	}
	if err := sim.CreateNodes(ctx, env.Client, nodes...); err != nil {
		return nil, err
	}
	return w, createStorageClasses(ctx, env)
}

// startSimulator runs the simulator in its own manager, with its admission
// webhook registered on the API server.
func (w *World) startSimulator() error {
	failurePolicy := admissionv1.Fail
	sideEffects := admissionv1.SideEffectClassNone
	path := sim.VMAdmissionPath
	install := &envtest.WebhookInstallOptions{
		ValidatingWebhooks: []*admissionv1.ValidatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "sim-virt-api"},
			TypeMeta:   metav1.TypeMeta{Kind: "ValidatingWebhookConfiguration", APIVersion: "admissionregistration.k8s.io/v1"},
			Webhooks: []admissionv1.ValidatingWebhook{{
				Name:                    "virtualmachine-validator.kubevirt.io",
				AdmissionReviewVersions: []string{"v1"},
				FailurePolicy:           &failurePolicy,
				SideEffects:             &sideEffects,
				ClientConfig:            admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "virt-api", Namespace: "kubevirt", Path: &path}},
				Rules: []admissionv1.RuleWithOperations{{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"v1"}, Resources: []string{"virtualmachines"}},
				}},
			}},
		}},
	}
	if err := install.Install(w.Env.Config); err != nil {
		return fmt.Errorf("installing the simulated virt-api webhook: %w", err)
	}
	mgr, err := ctrl.NewManager(w.Env.Config, ctrl.Options{
		Scheme:                 w.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: install.LocalServingHost, Port: install.LocalServingPort, CertDir: install.LocalServingCertDir}),
	})
	if err != nil {
		return err
	}
	if err := w.Sim.SetupWithManager(mgr); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.stopped = cancel, make(chan error, 1)
	go func() { w.stopped <- mgr.Start(ctx) }()
	return waitForWebhook(mgr, w.stopped)
}

func waitForWebhook(mgr ctrl.Manager, stopped <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-stopped:
			return fmt.Errorf("simulator stopped: %w", err)
		default:
		}
		if mgr.GetWebhookServer().StartedChecker()(nil) == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the simulator's webhook server did not start within a minute")
}

func createStorageClasses(ctx context.Context, env *testenv.Env) error {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: StandardClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: Provisioner, VolumeBindingMode: &immediate, AllowVolumeExpansion: ptr.To(true)},
		{ObjectMeta: metav1.ObjectMeta{Name: WFFCClass}, Provisioner: Provisioner, VolumeBindingMode: &wffc, AllowVolumeExpansion: ptr.To(true)},
	} {
		if err := env.Client.Create(ctx, sc); err != nil {
			return fmt.Errorf("creating storage class %s: %w", sc.Name, err)
		}
	}
	return nil
}

// Stop stops the simulator, the kube components, the API server and etcd.
func (w *World) Stop() error {
	var errs []error
	if w.cancel != nil {
		w.cancel()
		if err := <-w.stopped; err != nil {
			errs = append(errs, fmt.Errorf("simulator: %w", err))
		}
	}
	if w.Env != nil {
		errs = append(errs, w.Env.Stop())
	}
	return errors.Join(errs...)
}
