//go:build tools

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

// Package tools pins Cluster API's in-cluster IPAM provider (v1.1.0), which
// answers the IPAddressClaims of machines whose networks take addresses
// from InClusterIPPools and GlobalInClusterIPPools. v1.1.0 is the first
// release on Cluster API's ipam.cluster.x-k8s.io/v1beta2 claims, the
// version Cluster API v1.14 stores.
package tools

import _ "sigs.k8s.io/cluster-api-ipam-provider-in-cluster"
