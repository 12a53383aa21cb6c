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

// This file holds the condition every controller reports the same way:
// whether its infra cluster can be used.

package controllers

import (
	"context"

	"k8s.io/client-go/tools/events"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/infracluster"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/infra/tenancy"
)

// openInfra opens the infra cluster named by ref for user, and reports on
// obj whether it can be used in the InfraClusterAvailable condition, the
// same way for every controller (see infracluster.Access).
func openInfra(ctx context.Context, clients *infracluster.Clients, recorder events.EventRecorder, obj outcome.Object,
	src tenancy.Source, want tenancy.Request, user infracluster.User) infracluster.Access {
	access := clients.Open(ctx, src, obj.GetNamespace(), want, user)
	outcome.RecordWarning(recorder, obj, infrav1.InfraClusterAvailableCondition, access.Outcome)
	return access
}
