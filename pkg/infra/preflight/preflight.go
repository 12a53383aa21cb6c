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

// Package preflight checks an infra cluster before the first tenant
// cluster: whether KubeVirt and CDI are there, and what each provider
// feature needs of them (docs/versions.md, "What each feature needs of the
// infra cluster"): feature gates, how each StorageClass clones, storage for
// live migration, a load-balancer implementation for the default endpoint,
// and DNS the isolation policies let guests reach. It reads; only the
// load-balancer probe creates (and deletes) one Service.
package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Severity says how much a finding matters.
type Severity string

const (
	// OK is a capability that is there.
	OK Severity = "OK"
	// Info is what the check found without judging it.
	Info Severity = "Info"
	// Warning is a feature that will not work, or not as well.
	Warning Severity = "Warning"
	// Error is something without which no machine can run.
	Error Severity = "Error"
)

// Finding is one result of the preflight.
type Finding struct {
	// Check names what was looked at: kubevirt, cdi, storage,
	// live-migration, disk-growth, machinepools, multus,
	// load-balancer, dns.
	Check string `json:"check"`
	// Severity is OK, Info, Warning or Error.
	Severity Severity `json:"severity"`
	// Reason is a CamelCase word for the finding (docs/troubleshooting.md).
	Reason string `json:"reason"`
	// Message says what was found and, when it matters, what to do.
	Message string `json:"message"`
}

// Report is every finding of one run.
type Report struct {
	Findings []Finding `json:"findings"`
}

// Failed says whether any finding is an Error.
func (r Report) Failed() bool {
	for _, f := range r.Findings {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

// Problems are the Warning and Error findings.
func (r Report) Problems() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity == Warning || f.Severity == Error {
			out = append(out, f)
		}
	}
	return out
}

// Options tune a run.
type Options struct {
	// ProbeNamespace is where the load-balancer probe's Service goes.
	ProbeNamespace string
	// ProbeLoadBalancer creates a LoadBalancer Service and waits up to
	// ProbeTimeout for an address. Without it, existing Services are
	// looked at, and no address seen is only Info.
	ProbeLoadBalancer bool
	// ProbeTimeout bounds the wait for the probe's address.
	ProbeTimeout time.Duration
}

// Run checks the infra cluster c (with its discovery client) and returns
// every finding; an API error becomes a finding of the check it stopped.
func Run(ctx context.Context, c client.Client, disc discovery.DiscoveryInterface, o Options) Report {
	served := servedAPIs(disc)
	var r Report
	add := func(fs ...Finding) { r.Findings = append(r.Findings, fs...) }

	kv, err := readKubeVirt(ctx, c, served)
	add(kubeVirtFindings(kv, served, err)...)
	cdi, err := readCDI(ctx, c, served)
	add(cdiFindings(cdi, served, err)...)
	storage, err := readStorage(ctx, c, served)
	add(storageFindings(storage, cdi, err)...)
	add(multusFinding(served))
	add(loadBalancerFinding(ctx, c, o))
	dns, err := readDNS(ctx, c)
	add(dnsFindings(dns, err)...)
	return r
}

// WriteText writes the report as a table, one finding per line.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tCHECK\tREASON\tMESSAGE")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Severity, f.Check, f.Reason, f.Message)
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
