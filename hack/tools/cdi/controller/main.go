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

// Command cdi-controller runs CDI v1.64.0's controllers, wired as
// upstream's cmd/cdi-controller wires them, as a local process of the test
// world. Upstream's command serves its metrics on :8443 and reads the
// token keys and the upload signers from fixed paths of its pod; two
// worlds on one machine could not run it side by side, so this main takes
// them as flags.
package main

import (
	"context"
	"crypto/rsa"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	ocpconfigv1 "github.com/openshift/api/config/v1"
	imagev1 "github.com/openshift/api/image/v1"
	routev1 "github.com/openshift/api/route/v1"
	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	forklift "kubevirt.io/containerized-data-importer-api/pkg/apis/forklift/v1beta1"
	"kubevirt.io/containerized-data-importer/pkg/common"
	"kubevirt.io/containerized-data-importer/pkg/controller"
	dvc "kubevirt.io/containerized-data-importer/pkg/controller/datavolume"
	"kubevirt.io/containerized-data-importer/pkg/controller/populators"
	"kubevirt.io/containerized-data-importer/pkg/controller/transfer"
	cdimetrics "kubevirt.io/containerized-data-importer/pkg/monitoring/metrics/cdi-controller"
	"kubevirt.io/containerized-data-importer/pkg/util/cert"
	"kubevirt.io/containerized-data-importer/pkg/util/cert/fetcher"
	"kubevirt.io/containerized-data-importer/pkg/util/cert/generator"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// options are upstream's environment variables and fixed paths, as flags.
type options struct {
	kubeconfig, namespace, metricsAddress     string
	tokenKeyDir                               string
	uploadServerSignerDir, uploadClientSigner string
	importerImage, clonerImage                string
	uploadServerImage, ovirtPopulatorImage    string
	uploadProxyService, pullPolicy            string
	verbosity                                 int
}

func main() {
	o := options{}
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster CDI runs on")
	flag.StringVar(&o.namespace, "namespace", "cdi", "namespace CDI is installed in (upstream reads its pod's)")
	flag.StringVar(&o.metricsAddress, "metrics-address", "0", "address of the metrics endpoint; 0 disables it (upstream: :8443)")
	flag.StringVar(&o.tokenKeyDir, "token-key-dir", "", "directory with id_rsa and id_rsa.pub, the key pair of Secret cdi-api-signing-key (upstream: /var/run/cdi/token/keys)")
	flag.StringVar(&o.uploadServerSignerDir, "uploadserver-signer-dir", "", "directory with tls.crt and tls.key of the upload server signer")
	flag.StringVar(&o.uploadClientSigner, "uploadserver-client-signer-dir", "", "directory with tls.crt and tls.key of the upload client signer")
	flag.StringVar(&o.importerImage, "importer-image", "quay.io/kubevirt/cdi-importer:v1.64.0", "image of importer pods")
	flag.StringVar(&o.clonerImage, "cloner-image", "quay.io/kubevirt/cdi-cloner:v1.64.0", "image of cloner pods")
	flag.StringVar(&o.uploadServerImage, "uploadserver-image", "quay.io/kubevirt/cdi-uploadserver:v1.64.0", "image of upload server pods")
	flag.StringVar(&o.ovirtPopulatorImage, "ovirt-populator-image", "quay.io/kubevirt/cdi-importer:v1.64.0", "image of the oVirt populator")
	flag.StringVar(&o.uploadProxyService, "uploadproxy-service", "cdi-uploadproxy", "Service of the upload proxy")
	flag.StringVar(&o.pullPolicy, "pull-policy", common.DefaultPullPolicy, "pull policy of the pods CDI creates")
	flag.IntVar(&o.verbosity, "v", 1, "log verbosity")
	flag.Parse()
	ctrllog.SetLogger(zap.New(zap.Level(zapcore.Level(-1 * o.verbosity))))
	if err := run(signals.SetupSignalHandler(), o); err != nil {
		fmt.Fprintln(os.Stderr, "cdi-controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if err := cdimetrics.SetupMetrics(); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	k8s, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	// OpenShift's kinds too: the config controller looks for a Route
	// and an image stream, and finds none here.
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cdiv1.AddToScheme, extv1.AddToScheme,
		snapshotv1.AddToScheme, forklift.AddToScheme, imagev1.Install, ocpconfigv1.Install, routev1.Install} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	// Secrets, ConfigMaps, Jobs, CronJobs and Ingresses are watched in
	// CDI's namespace only, as upstream does (not on OpenShift: no Routes).
	inNamespace := cache.ByObject{Field: fields.Set{"metadata.namespace": o.namespace}.AsSelector()}
	// Upstream gives its manager controller-runtime v0.19.5's config
	// defaults (config.GetConfigOrDie in cmd/cdi-controller/controller.go):
	// 20 requests/s and bursts of 30 per resource type, where the plain
	// config above has client-go's 5 and 10. With those, the world's CDI
	// cloned a hundred disks at a quarter of the real one's pace.
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.QPS, mgrCfg.Burst = 20, 30
	mgr, err := manager.New(mgrCfg, manager.Options{
		Scheme:                     scheme,
		LeaderElection:             true,
		LeaderElectionNamespace:    o.namespace,
		LeaderElectionID:           "cdi-controller-leader-election-helper",
		LeaderElectionResourceLock: "leases",
		Metrics:                    metricsserver.Options{BindAddress: o.metricsAddress},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&networkingv1.Ingress{}: inNamespace, &batchv1.CronJob{}: inNamespace, &batchv1.Job{}: inNamespace,
			&corev1.ConfigMap{}: inNamespace, &corev1.Secret{}: inNamespace,
		}},
	})
	if err != nil {
		return err
	}
	public, private, err := tokenKeys(o.tokenKeyDir)
	if err != nil {
		return err
	}
	log := ctrllog.Log.WithName("controller")
	labels := map[string]string{}
	verbose := strconv.Itoa(o.verbosity)
	uploadClientCerts := &generator.FetchCertGenerator{Fetcher: &fetcher.FileCertFetcher{
		KeyFileName: filepath.Join(o.uploadClientSigner, "tls.key"), CertFileName: filepath.Join(o.uploadClientSigner, "tls.crt")}}
	uploadServerCerts := &generator.FetchCertGenerator{Fetcher: &fetcher.FileCertFetcher{
		KeyFileName: filepath.Join(o.uploadServerSignerDir, "tls.key"), CertFileName: filepath.Join(o.uploadServerSignerDir, "tls.crt")}}
	uploadServerBundle := &fetcher.ConfigMapCertBundleFetcher{Name: "cdi-uploadserver-signer-bundle", Client: k8s.CoreV1().ConfigMaps(o.namespace)}
	uploadClientBundle := &fetcher.ConfigMapCertBundleFetcher{Name: "cdi-uploadserver-client-signer-bundle", Client: k8s.CoreV1().ConfigMaps(o.namespace)}

	// The same controllers, in the same order, as upstream's command.
	steps := []func() error{
		func() error {
			_, err := controller.NewConfigController(mgr, log, o.uploadProxyService, common.ConfigName, labels)
			return err
		},
		func() error { _, err := controller.NewStorageProfileController(mgr, log, labels); return err },
		func() error { return dvc.CreateCommonIndexes(mgr) },
		func() error { _, err := dvc.NewImportController(ctx, mgr, log, labels); return err },
		func() error { _, err := dvc.NewUploadController(ctx, mgr, log, labels); return err },
		func() error {
			_, err := dvc.NewPvcCloneController(ctx, mgr, log, o.clonerImage, o.importerImage, o.pullPolicy, public, private, labels)
			return err
		},
		func() error {
			_, err := dvc.NewSnapshotCloneController(ctx, mgr, log, o.clonerImage, o.importerImage, o.pullPolicy, public, private, labels)
			return err
		},
		func() error { _, err := dvc.NewPopulatorController(ctx, mgr, log, labels); return err },
		func() error {
			_, err := controller.NewImportController(mgr, log, o.importerImage, o.pullPolicy, verbose, labels)
			return err
		},
		func() error {
			_, err := controller.NewCloneController(mgr, log, o.clonerImage, o.pullPolicy, verbose, uploadClientCerts, uploadServerBundle, public, labels)
			return err
		},
		func() error {
			_, err := controller.NewUploadController(mgr, log, o.uploadServerImage, o.pullPolicy, verbose, uploadServerCerts, uploadClientBundle, labels)
			return err
		},
		func() error { _, err := transfer.NewObjectTransferController(mgr, log, labels); return err },
		func() error {
			_, err := controller.NewDataImportCronController(mgr, log, o.importerImage, o.pullPolicy, labels)
			return err
		},
		func() error { _, err := controller.NewDataSourceController(mgr, log, labels); return err },
		func() error { return populators.CreateCommonPopulatorIndexes(mgr) },
		func() error { _, err := populators.NewImportPopulator(ctx, mgr, log, labels); return err },
		func() error { _, err := populators.NewUploadPopulator(ctx, mgr, log, labels); return err },
		func() error {
			_, err := populators.NewClonePopulator(ctx, mgr, log, o.clonerImage, o.pullPolicy, labels, public)
			return err
		},
		func() error {
			_, err := populators.NewForkliftPopulator(ctx, mgr, log, o.importerImage, o.ovirtPopulatorImage, labels)
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("setting up controller %d: %w", i, err)
		}
	}
	klog.V(1).Info("created cdi controllers")
	return mgr.Start(ctx)
}

// tokenKeys reads the key pair cdi-apiserver signs clone and upload
// tokens with.
func tokenKeys(dir string) (*rsa.PublicKey, *rsa.PrivateKey, error) {
	pub, err := os.ReadFile(filepath.Join(dir, "id_rsa.pub")) //nolint:gosec // a path the test world chose
	if err != nil {
		return nil, nil, err
	}
	public, err := controller.DecodePublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the token public key: %w", err)
	}
	priv, err := os.ReadFile(filepath.Join(dir, "id_rsa")) //nolint:gosec // a path the test world chose
	if err != nil {
		return nil, nil, err
	}
	key, err := cert.ParsePrivateKeyPEM(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the token private key: %w", err)
	}
	private, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("the token private key is not an RSA key")
	}
	return public, private, nil
}
