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

// Package tools pins kustomize, which make release-manifests runs (and whose
// packages ./renderflavors, run by make generate, builds the flavors and
// ClusterClasses with). It is built once into bin/ so that a release build
// makes no module proxy request.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
