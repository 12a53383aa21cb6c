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

// Command cdi-apiserver runs CDI v1.64.0's API server (the DataVolume,
// DataImportCron and populator admission webhooks, and the upload token
// API), wired as upstream's cmd/cdi-apiserver wires it, as a local process
// of the test world. Upstream's command binds 0.0.0.0:8443 and reads its
// certificate from a fixed path of its pod; this main takes them as flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"kubevirt.io/containerized-data-importer/pkg/apiserver"
	cdiclient "kubevirt.io/containerized-data-importer/pkg/client/clientset/versioned"
	dvc "kubevirt.io/containerized-data-importer/pkg/controller/datavolume"
	certwatcher "kubevirt.io/containerized-data-importer/pkg/util/cert/watcher"
	cryptowatch "kubevirt.io/containerized-data-importer/pkg/util/tls-crypto-watch"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster CDI runs on")
	listen := flag.String("listen", "0.0.0.0", "address to serve on (upstream: 0.0.0.0)")
	port := flag.Uint("port", 8443, "port to serve on (upstream: 8443)")
	certFile := flag.String("tls-cert-file", "", "serving certificate (upstream: /var/run/certs/cdi-apiserver-server-cert/tls.crt)")
	keyFile := flag.String("tls-key-file", "", "serving key")
	klog.InitFlags(nil)
	flag.Parse()
	defer klog.Flush()
	if err := run(signals.SetupSignalHandler(), *kubeconfig, *listen, *port, *certFile, *keyFile); err != nil {
		fmt.Fprintln(os.Stderr, "cdi-apiserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, listen string, port uint, certFile, keyFile string) error {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, cdiv1.AddToScheme, snapshotv1.AddToScheme} {
		if err := add(scheme.Scheme); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	k8s, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	aggregator, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cdi, err := cdiclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	snapshots, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := cluster.New(cfg)
	if err != nil {
		return err
	}
	if err := cdiv1.AddToScheme(c.GetScheme()); err != nil {
		return err
	}
	if err := dvc.CreateAvailablePersistentVolumeIndex(c.GetFieldIndexer()); err != nil {
		return err
	}
	authConfig, err := apiserver.NewAuthConfigWatcher(ctx, k8s)
	if err != nil {
		return err
	}
	tlsConfig, err := cryptowatch.NewCdiConfigTLSWatcher(ctx, cdi)
	if err != nil {
		return err
	}
	authorizer, err := apiserver.NewAuthorizorFromConfig(cfg, authConfig)
	if err != nil {
		return err
	}
	certs, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return err
	}
	app, err := apiserver.NewCdiAPIServer(listen, port, k8s, aggregator, cdi, snapshots, c.GetClient(),
		authorizer, authConfig, tlsConfig, certs, map[string]string{})
	if err != nil {
		return err
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			klog.Errorf("cluster cache stopped: %v", err)
		}
	}()
	go func() {
		if err := certs.Start(ctx.Done()); err != nil {
			klog.Errorf("certificate watcher stopped: %v", err)
		}
	}()
	return app.Start(ctx.Done())
}
