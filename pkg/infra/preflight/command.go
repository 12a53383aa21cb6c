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

package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/scheme"
)

// Command is the name of the manager's preflight subcommand.
const Command = "preflight"

// Main runs `manager preflight` with its arguments (after the command):
// it checks the infra cluster a kubeconfig reaches, prints the findings,
// and returns 1 if any is an Error, 2 on bad flags or no cluster.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(Command, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "The infra cluster's kubeconfig; empty means $KUBECONFIG, the in-cluster config or ~/.kube/config.")
	output := fs.StringP("output", "o", "text", "text or json.")
	o := Options{}
	fs.StringVar(&o.ProbeNamespace, "namespace", "default", "Where the load-balancer probe's Service is created (and deleted).")
	fs.BoolVar(&o.ProbeLoadBalancer, "probe-load-balancer", true, "Create a LoadBalancer Service, wait for its address and delete it; without it, only existing Services are looked at.")
	fs.DurationVar(&o.ProbeTimeout, "load-balancer-timeout", 30*time.Second, "How long the load-balancer probe waits for an address.")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: manager %s [flags]\n\nChecks an infra cluster for what each provider feature needs (docs/preflight.md).\n\n", Command)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "--output: want text or json, got %q\n", *output)
		return 2
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "no infra cluster to check: %v\n", err)
		return 2
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		fmt.Fprintf(stderr, "connecting to the infra cluster: %v\n", err)
		return 2
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "connecting to the infra cluster: %v\n", err)
		return 2
	}
	report := Run(ctx, c, disc, o)
	if *output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "writing the report: %v\n", err)
		return 2
	}
	if report.Failed() {
		return 1
	}
	return 0
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return config.GetConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}
