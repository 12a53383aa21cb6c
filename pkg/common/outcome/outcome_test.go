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

package outcome

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

func TestMerge(t *testing.T) {
	done := Ready("Done", "ok")
	wait := Wait("Waiting", "for a thing")
	fail := Fail("Broken", "fix it")
	tests := []struct {
		name    string
		in      []Outcome
		state   State
		reason  string
		requeue time.Duration
	}{
		{"all done", []Outcome{done, done}, Done, "Done", 0},
		{"a wait", []Outcome{done, wait, done}, Waiting, "Waiting", 0},
		{"a failure beats a wait before it", []Outcome{wait, fail}, Failed, "Broken", 0},
		{"the first failure", []Outcome{fail, Fail("Other", "x")}, Failed, "Broken", 0},
		{"the soonest requeue of any", []Outcome{wait.After(time.Minute), done.After(10 * time.Second), fail}, Failed, "Broken", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(tt.in...)
			if got.State != tt.state || got.Reason != tt.reason || got.RequeueAfter != tt.requeue {
				t.Errorf("Merge = %s/%s after %v, want %s/%s after %v", got.State, got.Reason, got.RequeueAfter, tt.state, tt.reason, tt.requeue)
			}
		})
	}
}

func TestRecordSetsTheConditionAndAnEventOnChange(t *testing.T) {
	km := &infrav1.KubevirtMachine{}
	recorder := events.NewFakeRecorder(10)
	Record(recorder, km, "Thing", Wait("Waiting", "for the thing"))
	Record(recorder, km, "Thing", Wait("Waiting", "for the thing, still"))
	Record(recorder, km, "Thing", Fail("Broken", "the thing broke"))
	Record(recorder, km, "Thing", Ready("Fine", "the thing works"))

	c := conditions.Get(km, "Thing")
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Fine" || c.Message != "the thing works" {
		t.Fatalf("condition = %+v", c)
	}
	want := []string{"Normal Waiting for the thing", "Warning Broken the thing broke", "Normal Fine the thing works"}
	got := recorded(recorder)
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %q (one per change of reason)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestRecordWarningRecordsOnlyFailures(t *testing.T) {
	km := &infrav1.KubevirtMachine{}
	recorder := events.NewFakeRecorder(10)
	RecordWarning(recorder, km, "Thing", Wait("Waiting", "for the thing"))
	RecordWarning(recorder, km, "Thing", Fail("Broken", "the thing broke"))
	RecordWarning(recorder, km, "Thing", Fail("Broken", "the thing broke again"))
	RecordWarning(recorder, km, "Thing", Ready("Fine", "the thing works"))

	if c := conditions.Get(km, "Thing"); c == nil || c.Reason != "Fine" {
		t.Fatalf("condition = %+v, want reason Fine", c)
	}
	got := recorded(recorder)
	if want := []string{"Warning Broken the thing broke"}; !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestSooner(t *testing.T) {
	for _, tc := range []struct{ a, b, want time.Duration }{
		{0, 0, 0},
		{0, time.Second, time.Second},
		{time.Second, 0, time.Second},
		{time.Second, 2 * time.Second, time.Second},
		{2 * time.Second, time.Second, time.Second},
	} {
		if got := Sooner(tc.a, tc.b); got != tc.want {
			t.Errorf("Sooner(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

// recorded drains the Events the fake recorder recorded.
func recorded(recorder *events.FakeRecorder) []string {
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	return got
}
