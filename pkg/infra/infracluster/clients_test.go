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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A controller's Watch blocks until that controller's event handlers took
// in their first events, and the CRD handler calls ForgetAPIs: a watch
// function must never hold what ForgetAPIs needs (a provider once waited
// out its two-minute cache sync timeout that way and restarted).
func TestForgetAPIsDoesNotWaitForWatchFunctions(t *testing.T) {
	c := &Clients{checker: &Checker{localAPIs: &rememberedAPIs{}}, entries: map[string]*entry{}, users: map[User]string{}}
	calls := 0
	c.AddWatches(func(*Infra) error {
		calls++
		forgotten := make(chan struct{})
		go func() {
			c.ForgetAPIs()
			close(forgotten)
		}()
		select {
		case <-forgotten:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("ForgetAPIs waited for a running watch function")
		}
	})
	watched := false
	infra := &Infra{Status: APIStatus{Available: true}}
	if err := c.addWatches(infra, &watched); err != nil {
		t.Fatal(err)
	}
	if err := c.addWatches(infra, &watched); err != nil {
		t.Fatal(err)
	}
	if !watched || calls != 1 {
		t.Errorf("watched %v after %d calls; want the watches added once", watched, calls)
	}
}

func TestIsUnreachable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://infra:6443/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection reset", fmt.Errorf("watch: %w", syscall.ECONNRESET), true},
		{"dropped mid-answer", &url.Error{Op: "Get", URL: "https://infra:6443/api", Err: io.ErrUnexpectedEOF}, true},
		{"the caller gave up", &url.Error{Op: "Get", URL: "https://infra:6443/api", Err: context.Canceled}, false},
		{"an answer", apierrors.NewInternalError(errors.New("failed calling webhook")), false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		if got := IsUnreachable(tt.err); got != tt.want {
			t.Errorf("%s: IsUnreachable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
