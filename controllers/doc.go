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

// Package controllers holds the thin reconcilers of the CAPKV kinds. Each one
// fetches its object, finds its Cluster API owners, honours pause, patches
// once at the end, and delegates the work to the packages under pkg/.
package controllers

// The manager's metrics endpoint authenticates and authorizes its scrapers
// (Cluster API's util/flags diagnostics options).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The preflight at start reads what each feature needs of the management
// cluster as the local infra cluster (pkg/infra/preflight AtStart), and reports
// problems as Events on the manager's Pod.
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=cdis;storageprofiles,verbs=list
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=list
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get
