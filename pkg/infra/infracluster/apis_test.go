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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func servingDiscovery(withCDI bool) *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "kubevirt.io/v1", APIResources: []metav1.APIResource{
		{Name: "virtualmachines"}, {Name: "virtualmachineinstances"}}}}
	if withCDI {
		d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: "cdi.kubevirt.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "datavolumes"}}})
	}
	return d
}

func TestRememberedAPIsAskOnceUntilForgotten(t *testing.T) {
	d := servingDiscovery(true)
	r := &rememberedAPIs{discovery: d}
	for range 5 {
		if s := r.check(); !s.Available {
			t.Fatalf("check: %+v", s)
		}
	}
	if n := len(d.Actions()); n != 2 {
		t.Fatalf("5 checks asked discovery %d times, want 2 (one per API group)", n)
	}
	r.forget()
	r.check()
	if n := len(d.Actions()); n != 4 {
		t.Fatalf("a check after forget asked %d times in all, want 4", n)
	}
}

func TestRememberedAPIsExpire(t *testing.T) {
	d := servingDiscovery(true)
	r := &rememberedAPIs{discovery: d, ttl: time.Nanosecond}
	r.check()
	time.Sleep(time.Millisecond) // past the 1ns TTL; nothing else to wait on
	r.check()
	if n := len(d.Actions()); n != 4 {
		t.Fatalf("two checks past the TTL asked %d times, want 4", n)
	}
}

func TestRememberedAPIsDoNotRememberFailure(t *testing.T) {
	d := servingDiscovery(false)
	r := &rememberedAPIs{discovery: d}
	for range 2 {
		if s := r.check(); s.Available || s.Reason != "CDINotInstalled" {
			t.Fatalf("check without CDI: %+v", s)
		}
	}
	if n := len(d.Actions()); n != 4 {
		t.Fatalf("two failing checks asked %d times, want 4", n)
	}
	d.Resources = servingDiscovery(true).Resources
	if s := r.check(); !s.Available {
		t.Fatalf("check after CDI was installed: %+v", s)
	}
}
