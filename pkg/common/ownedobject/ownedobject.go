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

// Package ownedobject creates, corrects and deletes the objects the provider
// keeps on an infra cluster for a KubevirtCluster or KubevirtMachine. Each carries
// the capkv.io/owner annotation, so an object of the same name that someone
// else made is never taken over, changed or deleted.
package ownedobject

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// Key is the owner annotation value of an object: "<namespace>/<name>".
func Key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// IsOwnedBy reports whether o carries the owner annotation of owner.
func IsOwnedBy(o metav1.Object, owner string) bool {
	return o.GetAnnotations()[infrav1.OwnerAnnotation] == owner
}

// Mark sets the owner annotation on o.
func Mark(o metav1.Object, owner string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[infrav1.OwnerAnnotation] = owner
	o.SetAnnotations(a)
}

// Ensure creates want, marked for owner, when no object of its name exists,
// and returns the live object. When one exists and is owner's, sync copies
// what the provider owns from want onto it and reports whether anything
// changed; only then is it updated. ref, when set, becomes the controller
// reference of a created object; it is only valid in the owner's namespace
// on the management cluster. what names the object in errors. The Change
// says what was done.
func Ensure[T client.Object](ctx context.Context, c client.Client, want T, live T, owner string, ref *metav1.OwnerReference, what string, sync func(live, want T) bool) (T, Change, error) {
	Mark(want, owner)
	err := c.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		if ref != nil {
			want.SetOwnerReferences([]metav1.OwnerReference{*ref})
		}
		if err := c.Create(ctx, want); err != nil {
			return want, Unchanged, fmt.Errorf("creating %s %s: %w", what, client.ObjectKeyFromObject(want), err)
		}
		return want, Created, nil
	}
	if err != nil {
		return live, Unchanged, fmt.Errorf("reading %s %s: %w", what, client.ObjectKeyFromObject(want), err)
	}
	if !IsOwnedBy(live, owner) {
		return live, Unchanged, fmt.Errorf("%s %s exists but was not created for %s; rename or remove it", what, client.ObjectKeyFromObject(live), owner)
	}
	if !sync(live, want) {
		return live, Unchanged, nil
	}
	if err := c.Update(ctx, live); err != nil {
		return live, Unchanged, fmt.Errorf("correcting drift of %s %s: %w", what, client.ObjectKeyFromObject(live), err)
	}
	return live, Corrected, nil
}

// Change is what Ensure did.
type Change int

const (
	// Unchanged: the object was as wanted (or an error stopped Ensure).
	Unchanged Change = iota
	// Created: the object did not exist.
	Created
	// Corrected: the object had drifted and was put back.
	Corrected
)

// Delete deletes the object named key if it is owner's, and reports whether
// it is gone (an object that is not owner's counts as gone: it is not ours
// to wait for).
func Delete(ctx context.Context, c client.Client, live client.Object, key client.ObjectKey, owner string) (bool, error) {
	if err := c.Get(ctx, key, live); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if !IsOwnedBy(live, owner) {
		return true, nil
	}
	return false, DeleteLive(ctx, c, live)
}

// DeleteLive deletes an object already read, unless it is being deleted;
// the UID precondition keeps a newer object of the same name safe.
func DeleteLive(ctx context.Context, c client.Client, live client.Object) error {
	if live.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := live.GetUID()
	return client.IgnoreNotFound(c.Delete(ctx, live, client.Preconditions{UID: &uid}))
}
