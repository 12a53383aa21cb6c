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

package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
	"github.com/capkv/cluster-api-provider-kubevirt/test/world"
)

// The namespace and Deployment clusterctl init installs the provider as
// (config/default: namespace capkv-system, name prefix capkv-).
const (
	Namespace      = "capkv-system"
	DeploymentName = "capkv-controller-manager"
	ServiceAccount = "capkv-manager"
)

// Deployment is the provider's Deployment as installed.
var Deployment = types.NamespacedName{Namespace: Namespace, Name: DeploymentName}

// Management is a management cluster of the world, reachable by clusterctl.
type Management struct {
	// Config and Client reach it as an administrator.
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the administrator's kubeconfig file, for clusterctl.
	Kubeconfig string
	// Env is its API server.
	Env *testenv.Env
}

// Init installs the provider into a management cluster with
// clusterctl init --infrastructure kubevirt:version, the way a user does,
// after registering the in-process Cluster API providers in the inventory.
// The world runs the installed Deployment's pods (world.PodRunner) from
// the image make image wrote (out/image), or bin/manager for a release by
// tag without one, so the provider runs with the RBAC, webhooks and serving
// certificate the release installed; init waits until the Deployment is
// available. It returns clusterctl's log and output and the runner, which the
// caller stops.
func (cc *Clusterctl) Init(ctx context.Context, m Management, version string) (string, *world.PodRunner, error) {
	if err := RegisterInProcessProviders(ctx, m.Config, m.Client, cc.CAPIVersion); err != nil {
		return "", nil, err
	}
	runner, err := world.StartPodRunner(m.Env, Deployment, filepath.Join(testenv.RepoRoot(), "bin", "manager"), cc.Binaries,
		filepath.Join(testenv.RepoRoot(), "out", "image"))
	if err != nil {
		return "", nil, err
	}
	stdout, log, err := cc.run(ctx, nil, "init", "--infrastructure", "kubevirt:"+version,
		"--kubeconfig", m.Kubeconfig, "--wait-providers", "--wait-provider-timeout", "300")
	out := log + stdout
	if err != nil {
		return out, nil, errors.Join(err, fmt.Errorf("provider container log:\n%s", runner.Logs()), runner.Stop())
	}
	return out, runner, nil
}

// WorldVariables are the provider's clusterctl variables for the test
// world: its infra cluster has no IPv6, specs count golden volumes, which
// must not outlive their last user by the default hour, and a cluster on
// the world without a load balancer falls back in seconds rather than the
// default two minutes (its load balancer, when on, answers at once).
var WorldVariables = map[string]string{"CAPKV_ISOLATION_IP_FAMILIES": "IPv4", "CAPKV_GOLDEN_IMAGE_RETENTION": "2s", "CAPKV_NODE_JOIN_TIMEOUT": "20s",
	"CAPKV_LOAD_BALANCER_FALLBACK_AFTER": "20s"}

// NewForWorld is New in a new temporary directory, with this build's
// release as version, read from the clusterctl repository make
// release-manifests wrote (WrittenRelease), and WorldVariables set.
func NewForWorld(version string) (*Clusterctl, error) {
	written, err := WrittenRelease(version)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "capkv-clusterctl-")
	if err != nil {
		return nil, err
	}
	cc, err := New(dir, Release{Version: version, Dir: written.Dir})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return cc, cc.SetVariables(WorldVariables)
}

// ManagementOf is env as clusterctl reaches it, with an administrator's
// kubeconfig written to the Clusterctl's directory as name.kubeconfig.
func (cc *Clusterctl) ManagementOf(env *testenv.Env, name string) (Management, error) {
	m := Management{Config: env.Config, Client: env.Client, Env: env, Kubeconfig: filepath.Join(cc.Dir, name+".kubeconfig")}
	return m, env.WriteKubeconfig(m.Kubeconfig, "clusterctl")
}

// Cleanup removes the Clusterctl's directory, unless TESTENV_VERBOSE keeps
// it for a look.
func (cc *Clusterctl) Cleanup() error {
	if os.Getenv("TESTENV_VERBOSE") != "" {
		return nil
	}
	return os.RemoveAll(cc.Dir)
}

// WrittenRelease is the release make release-manifests wrote into out/'s
// clusterctl repository (out/repository/infrastructure-kubevirt/<version>/),
// as version: the version directory of that name, else the one written
// last (a suite may install this build under another version).
func WrittenRelease(version string) (Release, error) {
	root := filepath.Join(testenv.RepoRoot(), "out", "repository", ProviderLabel)
	if _, err := os.Stat(filepath.Join(root, version)); err == nil {
		return Release{Version: version, Dir: filepath.Join(root, version)}, nil
	}
	entries, err := os.ReadDir(root)
	var last string
	var lastTime time.Time
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && e.IsDir() && info.ModTime().After(lastTime) {
			last, lastTime = e.Name(), info.ModTime()
		}
	}
	if last == "" {
		return Release{}, errors.Join(fmt.Errorf("%s holds no release of this build: run make release-manifests", root), err)
	}
	return Release{Version: version, Dir: filepath.Join(root, last)}, nil
}
