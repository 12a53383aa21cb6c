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

package tenantcloud

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCurrent(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	a := Access{Server: "https://a", Namespace: "ns", ServiceAccount: "sa", ServiceAccountUID: "u1"}
	secret := func(renew time.Time, hash string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			ExpirationAnnotation: now.Add(time.Hour).Format(time.RFC3339),
			RenewalAnnotation:    renew.Format(time.RFC3339),
			AccessAnnotation:     hash,
		}}, Data: map[string][]byte{KubeconfigKey: []byte("x"), TokenKey: []byte("t")}}
	}
	for _, tc := range []struct {
		name     string
		secret   *corev1.Secret
		lifetime time.Duration
		want     bool
	}{
		{"not yet due", secret(now.Add(time.Minute), a.Hash()), 0, true},
		{"longer-lived than the lifetime now asked", secret(now.Add(time.Minute), a.Hash()), 10 * time.Minute, false},
		{"due", secret(now, a.Hash()), 0, false},
		{"written for other access", secret(now.Add(time.Minute), "other"), 0, false},
		{"renewal time unreadable", func() *corev1.Secret {
			s := secret(now.Add(time.Minute), a.Hash())
			s.Annotations[RenewalAnnotation] = "soon"
			return s
		}(), 0, false},
		{"kubeconfig emptied", func() *corev1.Secret {
			s := secret(now.Add(time.Minute), a.Hash())
			s.Data = nil
			return s
		}(), 0, false},
		{"token file removed", func() *corev1.Secret {
			s := secret(now.Add(time.Minute), a.Hash())
			delete(s.Data, TokenKey)
			return s
		}(), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lifetime := tc.lifetime
			if lifetime == 0 {
				lifetime = 24 * time.Hour
			}
			_, _, ok := current(tc.secret, a, lifetime, now)
			NewWithT(t).Expect(ok).To(Equal(tc.want))
		})
	}
}
