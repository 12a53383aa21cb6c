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
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/sets"
	cliflag "k8s.io/component-base/cli/flag"

	// The issuer implementations register themselves with pkg/issuer; the
	// Issuer and ClusterIssuer controllers look them up by type to set
	// the Ready condition.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// defaultControllers are the control loops this binary runs unless
// --controllers says otherwise: everything needed to turn a Certificate
// into a signed Secret through a SelfSigned or CA (Cluster)Issuer. The
// approver is required because signers only act on CertificateRequests
// that carry the Approved condition; the revision manager prunes old
// requests as upstream does by default.
var defaultControllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	crapprover.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// controllerOptions holds the controller subcommand's flags.
type controllerOptions struct {
	kubeconfig               string
	master                   string
	qps                      float32
	burst                    int
	namespace                string
	clusterResourceNamespace string
	controllers              []string
	workers                  int
	enableOwnerRef           bool
	minBackoff, maxBackoff   time.Duration
	metricsAddress           string
	featureGates             map[string]bool
	leader                   leaderOptions
}

// newControllerCommand builds `cert-manager controller`. Defaults differ
// from upstream where tests need it: leader election is off and no HTTP
// listener is opened unless asked for, so several instances can share a
// machine.
func newControllerCommand(ctx context.Context) *cobra.Command {
	o := &controllerOptions{featureGates: map[string]bool{}}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the cert-manager controllers for SelfSigned and CA issuers",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(o.featureGates); err != nil {
				return fmt.Errorf("invalid --feature-gates: %w", err)
			}
			return runController(logf.NewContext(ctx, logf.Log, "controller"), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster config is used when empty.")
	fs.StringVar(&o.master, "master", "", "Optional API server address, overriding the kubeconfig's.")
	fs.Float32Var(&o.qps, "kube-api-qps", 20, "Client-side QPS limit, used only when the API server lacks priority and fairness.")
	fs.IntVar(&o.burst, "kube-api-burst", 50, "Client-side burst limit, used only when the API server lacks priority and fairness.")
	fs.StringVar(&o.namespace, "namespace", "", "Limit cert-manager to one namespace (disables ClusterIssuers); all namespaces when empty.")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "cert-manager",
		"Namespace holding the Secrets that ClusterIssuers refer to (e.g. a CA ClusterIssuer's key pair).")
	// The same setting under the name the CAPKV test harness uses.
	fs.StringVar(&o.clusterResourceNamespace, "namespace-for-cluster-resources", "cert-manager",
		"Alias of --cluster-resource-namespace.")
	fs.StringSliceVar(&o.controllers, "controllers", []string{"*"}, fmt.Sprintf(
		"Controllers to run: '*' is the default set, 'name' adds one, '-name' removes one. Default set: %s. Available: %s.",
		strings.Join(defaultControllers, ", "), strings.Join(knownControllers(), ", ")))
	fs.IntVar(&o.workers, "concurrent-workers", 5, "Workers per controller.")
	fs.BoolVar(&o.enableOwnerRef, "enable-certificate-owner-ref", false, "Make each Certificate the owner of its Secret.")
	fs.DurationVar(&o.minBackoff, "certificate-request-minimum-backoff-duration", time.Hour,
		"First delay before re-issuing after a failed CertificateRequest; doubles per failure.")
	fs.DurationVar(&o.maxBackoff, "certificate-request-maximum-backoff-duration", 32*time.Hour,
		"Cap on the delay between failed issuance attempts.")
	fs.StringVar(&o.metricsAddress, "metrics-listen-address", "",
		"Address for the Prometheus endpoint, e.g. 127.0.0.1:0; disabled when empty.")
	fs.Var(cliflag.NewMapStringBool(&o.featureGates), "feature-gates",
		"key=value pairs for cert-manager feature gates. Options are:\n"+
			strings.Join(utilfeature.DefaultFeatureGate.KnownFeatures(), "\n"))
	o.leader.addFlags(fs, "kube-system")
	return cmd
}

// knownControllers lists the controllers linked into this binary, which
// is what --controllers can name; upstream's full list also has ACME,
// Vault, Venafi and the ingress/gateway shims, which are left out.
func knownControllers() []string {
	names := make([]string, 0, len(controller.Known()))
	for name := range controller.Known() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// enabledControllers resolves --controllers against the default set and
// rejects unknown names, so a typo fails loudly instead of silently
// leaving Certificates unissued.
func enabledControllers(o *controllerOptions) ([]string, error) {
	enabled, disabled := sets.New[string](), sets.New[string]()
	for _, name := range o.controllers {
		switch {
		case name == "*":
			enabled.Insert(defaultControllers...)
		case strings.HasPrefix(name, "-"):
			disabled.Insert(strings.TrimPrefix(name, "-"))
		default:
			enabled.Insert(name)
		}
	}
	if enabled.Len() == 0 && disabled.Len() > 0 {
		enabled.Insert(defaultControllers...)
	}
	for name := range enabled.Union(disabled) {
		if _, ok := controller.Known()[name]; !ok {
			return nil, fmt.Errorf("unknown controller %q (available: %s)", name, strings.Join(knownControllers(), ", "))
		}
	}
	if o.namespace != "" {
		// A namespaced install cannot watch cluster-scoped issuers.
		disabled.Insert(clusterissuers.ControllerName)
	}
	return sets.List(enabled.Difference(disabled)), nil
}

// runController mirrors upstream's cmd/controller Run: one ContextFactory
// shares informer factories between all control loops, each loop is built
// from cert-manager's own registry (controller.Known) and the informers
// start only after every loop has registered the ones it needs.
func runController(ctx context.Context, o *controllerOptions) error {
	log := logf.FromContext(ctx)
	names, err := enabledControllers(o)
	if err != nil {
		return err
	}
	log.Info("starting cert-manager controller", "version", util.AppVersion, "controllers", names)

	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		APIServerHost:      o.master,
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   o.qps,
		KubernetesAPIBurst: o.burst,
		Namespace:          o.namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: o.clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           o.enableOwnerRef,
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: o.minBackoff,
			CertificateRequestMaximumBackoffDuration: o.maxBackoff,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}

	// Cancelling runCtx stops everything started so far when startup
	// fails half-way, as well as on a signal.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(runCtx)
	if o.metricsAddress != "" {
		if err := serveMetrics(gctx, g, o.metricsAddress, base.Metrics.NewServer); err != nil {
			return err
		}
	}
	leading, err := o.leader.waitForLeadership(gctx, g, base.Client, "cert-manager-controller")
	if err != nil || !leading {
		cancel()
		return errors.Join(err, g.Wait())
	}

	for _, name := range names {
		loop, err := controller.Known()[name](factory)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("building controller %s: %w", name, err), g.Wait())
		}
		g.Go(func() error {
			log.V(logf.InfoLevel).Info("starting controller", "controller", name)
			return loop.Run(o.workers, gctx)
		})
	}

	base.SharedInformerFactory.Start(gctx.Done())
	base.KubeSharedInformerFactory.Start(gctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())

	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	log.Info("control loops exited")
	return err
}

// serveMetrics exposes cert-manager's Prometheus registry on addr. It is
// off by default; an address like 127.0.0.1:0 picks a free port, which is
// logged, so parallel test instances never collide.
func serveMetrics(ctx context.Context, g *errgroup.Group, addr string, newServer func(net.Listener) *http.Server) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	srv := newServer(ln)
	logf.FromContext(ctx).Info("serving metrics", "address", ln.Addr().String())
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	})
	return nil
}
