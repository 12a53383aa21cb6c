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

package main

import (
	"context"
	"fmt"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// caInjectorOptions holds the cainjector subcommand's flags; the names
// match upstream's cainjector so its documentation applies.
type caInjectorOptions struct {
	kubeconfig        string
	master            string
	namespace         string
	ignoreNamespaces  []string
	certificates      bool
	validatingHooks   bool
	mutatingHooks     bool
	crds              bool
	apiServices       bool
	metricsAddress    string
	healthAddress     string
	certificateCRDTTL time.Duration
	leader            leaderOptions
}

// newCAInjectorCommand builds `cert-manager cainjector`, which copies CA
// bundles into webhook configurations, CRD conversion webhooks and
// APIServices annotated with cert-manager.io/inject-ca-from(-secret).
func newCAInjectorCommand(ctx context.Context) *cobra.Command {
	o := &caInjectorOptions{}
	cmd := &cobra.Command{
		Use:   "cainjector",
		Short: "Run the cert-manager CA injector",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return runCAInjector(logf.NewContext(ctx, logf.Log, "cainjector"), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster config is used when empty.")
	fs.StringVar(&o.master, "master", "", "Optional API server address, overriding the kubeconfig's.")
	fs.StringVar(&o.namespace, "namespace", "", "Only inject into objects of this namespace; all when empty.")
	fs.StringSliceVar(&o.ignoreNamespaces, "ignore-namespaces", nil, "Namespaces whose Certificates and Secrets are never used as CA sources.")
	fs.BoolVar(&o.certificates, "enable-certificates-data-source", true, "Honour cert-manager.io/inject-ca-from (reads Certificates).")
	fs.BoolVar(&o.validatingHooks, "enable-validatingwebhookconfigurations-injectable", true, "Inject into ValidatingWebhookConfigurations.")
	fs.BoolVar(&o.mutatingHooks, "enable-mutatingwebhookconfigurations-injectable", true, "Inject into MutatingWebhookConfigurations.")
	fs.BoolVar(&o.crds, "enable-customresourcedefinitions-injectable", true, "Inject into CustomResourceDefinition conversion webhooks.")
	fs.BoolVar(&o.apiServices, "enable-apiservices-injectable", true, "Inject into APIServices (needs the aggregation API).")
	fs.StringVar(&o.metricsAddress, "metrics-listen-address", "0", "Metrics address, e.g. 127.0.0.1:0; '0' disables it.")
	fs.StringVar(&o.healthAddress, "health-probe-listen-address", "0", "Health probe address; '0' disables it.")
	fs.DurationVar(&o.certificateCRDTTL, "certificate-crd-wait-timeout", 5*time.Minute,
		"How long to wait for the Certificate CRD when the certificates data source is on.")
	o.leader.addFlags(fs, "kube-system")
	return cmd
}

// runCAInjector follows upstream's cainjector: a controller-runtime
// manager whose client never caches Secrets (they are read on demand), and
// cert-manager's RegisterAllInjectors adding one reconciler per enabled
// injectable kind. It returns when ctx is cancelled.
func runCAInjector(ctx context.Context, o *caInjectorOptions) error {
	log := logf.FromContext(ctx)
	log.Info("starting cert-manager cainjector", "version", util.AppVersion)

	cfg, err := clientcmd.BuildConfigFromFlags(o.master, o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	if cfg.QPS == 0 {
		// The same client-side limits controller-runtime's GetConfig sets.
		cfg.QPS, cfg.Burst = 20, 30
	}
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextv1.AddToScheme(scheme))
	utilruntime.Must(apiregv1.AddToScheme(scheme))

	var namespaces map[string]cache.Config
	if o.namespace != "" {
		namespaces = map[string]cache.Config{o.namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			ReaderFailOnMissingInformer: true,
			DefaultNamespaces:           namespaces,
		},
		Client: client.Options{
			Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}},
		},
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddress},
		HealthProbeBindAddress:        o.healthAddress,
		LeaderElection:                o.leader.enabled,
		LeaderElectionNamespace:       o.leader.namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leader.leaseDuration,
		RenewDeadline:                 &o.leader.renewDeadline,
		RetryPeriod:                   &o.leader.retryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	if o.certificates {
		if err := waitForCertificateCRD(ctx, mgr, o.certificateCRDTTL); err != nil || ctx.Err() != nil {
			return err
		}
	}

	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    o.namespace,
		IgnoreNamespaces:             o.ignoreNamespaces,
		EnableCertificatesDataSource: o.certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.ValidatingWebhookConfigurationName: o.validatingHooks,
			cainjector.MutatingWebhookConfigurationName:   o.mutatingHooks,
			cainjector.CustomResourceDefinitionName:       o.crds,
			cainjector.APIServiceName:                     o.apiServices,
		},
	})
	if err != nil {
		return fmt.Errorf("registering injectors: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("cainjector stopped")
	return nil
}

// waitForCertificateCRD polls for certificates.cert-manager.io before the
// manager starts: the injectors watch Certificates, and a watch on a kind
// the API server does not serve would fail the cache sync. Upstream waits
// the same way, so starting cainjector before the CRDs exist is fine.
func waitForCertificateCRD(ctx context.Context, mgr ctrl.Manager, timeout time.Duration) error {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	log := logf.FromContext(ctx)
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextv1.CustomResourceDefinition{}
		err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, crd)
		switch {
		case apierrors.IsNotFound(err):
			log.Info("waiting for the certificates.cert-manager.io CRD")
			return false, nil
		case err != nil:
			return false, err
		}
		return true, nil
	})
	if err != nil && ctx.Err() != nil {
		// Interrupted by a signal: a clean stop, not a failure.
		return nil
	}
	if err != nil {
		return fmt.Errorf("waiting for the certificates.cert-manager.io CRD: %w", err)
	}
	return nil
}
