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

package infracluster

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// Checker resolves the infra cluster of an object and checks its APIs.
type Checker struct {
	// Reader reads infra cluster Secrets; an uncached reader keeps every
	// Secret of the management cluster out of the manager's memory.
	Reader client.Reader
	// Local reaches the management cluster, the default infra cluster.
	Local *rest.Config
	// SecretNamespaces, when not empty, are the only namespaces besides an
	// object's own from which infra cluster Secrets are read.
	SecretNamespaces []string
	// Policy decides which infra cluster and namespaces an object may use.
	Policy *tenancy.Policy

	// localAPIs remembers the management cluster's APIs until one of the
	// watched KubeVirt or CDI CustomResourceDefinitions changes, or for
	// apisRecheck at most.
	localAPIs *rememberedAPIs
}

// NewChecker returns a Checker for the management cluster at local.
func NewChecker(reader client.Reader, local *rest.Config) (*Checker, error) {
	d, err := discovery.NewDiscoveryClientForConfig(local)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	return &Checker{Reader: reader, Local: local, Policy: &tenancy.Policy{Reader: reader}, localAPIs: &rememberedAPIs{discovery: d, ttl: apisRecheck}}, nil
}
