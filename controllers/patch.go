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

package controllers

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/adoption"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/common/outcome"
)

// patchOnce stores what a reconcile changed in obj since stored in at most
// two requests: one merge patch of metadata and spec, then, when
// writeStatus, one of the whole status. Cluster API's patch helper splits
// the status into a conditions patch and a patch of the rest, a write more
// whenever both change, which for these objects is nearly every time. Each
// controller is the only writer of its objects' status (the Paused
// condition included), so a merge patch of the status loses nobody's
// change. obj must be a pointer to a struct with a Status field.
func patchOnce(ctx context.Context, c client.Client, stored, obj outcome.Object, writeStatus bool) error {
	// What the community provider left in its conditions cannot be written
	// back under this schema (docs/migrating-from-capk.md).
	obj.SetConditions(adoption.WithoutCommunityConditions(obj.GetConditions()))
	status := reflect.ValueOf(obj.DeepCopyObject()).Elem().FieldByName("Status")

	// The spec patch sends no status, and its answer carries the stored
	// status, which is put back to the one computed.
	base := stored.DeepCopyObject().(client.Object)
	setStatus(base, status)
	if !equality.Semantic.DeepEqual(base, obj) {
		if err := c.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
			return client.IgnoreNotFound(err)
		}
		setStatus(obj, status)
		if obj.GetGeneration() != stored.GetGeneration() {
			observeGeneration(obj, stored.GetGeneration())
		}
	}
	storedStatus := reflect.ValueOf(stored).Elem().FieldByName("Status")
	if !writeStatus || equality.Semantic.DeepEqual(storedStatus.Interface(), reflect.ValueOf(obj).Elem().FieldByName("Status").Interface()) {
		return nil
	}
	base = obj.DeepCopyObject().(client.Object)
	setStatus(base, storedStatus)
	err := c.Status().Patch(ctx, obj, client.MergeFrom(base))
	if apierrors.IsNotFound(err) {
		// The finalizer just went, and the object with it.
		return nil
	}
	return err
}

func setStatus(obj client.Object, status reflect.Value) {
	reflect.ValueOf(obj).Elem().FieldByName("Status").Set(status)
}

// observeGeneration moves conditions that observed the old generation to
// the new one, which the spec patch just made: in this write, not in a
// write of their own next time.
func observeGeneration(obj outcome.Object, old int64) {
	cs := obj.GetConditions()
	for i := range cs {
		if cs[i].ObservedGeneration == old {
			cs[i].ObservedGeneration = obj.GetGeneration()
		}
	}
	obj.SetConditions(cs)
}
