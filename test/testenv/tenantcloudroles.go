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

package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/pkg/cluster/tenantcloud"
)

// installTenantCloudRoles creates the ClusterRoles of the tenant
// credential, named as the release names them, as clusterctl init does on
// the management cluster and an administrator on an external infra one: the
// provider only binds them.
func installTenantCloudRoles(ctx context.Context, c client.Client) error {
	path := filepath.Join(RepoRoot(), "config", "tenantcloud", "roles", "roles.yaml")
	data, err := os.ReadFile(path) //nolint:gosec // a file of the repository
	if err != nil {
		return err
	}
	prefix := strings.TrimSuffix(tenantcloud.ClusterRolePrefix, "tenant-")
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		role := &rbacv1.ClusterRole{}
		if err := dec.Decode(role); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		role.Name = prefix + role.Name
		// An environment started again on kept data has them already.
		if err := c.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
		}
	}
}
