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

// Package sim plays the parts of KubeVirt and CDI that need a node or a
// storage backend, on a real API server where the real virt-api and
// virt-controller and CDI's controller run: the kubelet of the
// virt-launcher pods, virt-handler, the guest, and CDI's pods (importer,
// clone source, upload server) and the CSI driver, so that the provider
// can be tested where no hypervisor can run. virt-launcher pods
// are created by the real virt-controller and scheduled by the real
// kube-scheduler onto simulated Nodes; the real kube-controller-manager
// binds volumes and collects garbage. Every rule it plays is written, with
// its upstream source, in docs/kubevirt-behaviour.md; docs/simulator.md
// says, part by part, what is real and what is simulated.
package sim

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Options tune the simulation.
type Options struct {
	// TimeScale multiplies every simulated latency; 0 makes them all
	// instant, 1 is real time.
	TimeScale float64
	// BootDelay is how long a guest takes from Running to joining its
	// cluster, before scaling.
	BootDelay time.Duration
	// ImportBytesPerSecond is the download rate of a CDI import, before
	// scaling.
	ImportBytesPerSecond int64
	// ImageSize is the size of every simulated image.
	ImageSize int64
	// PodCIDR is where virt-launcher pod IPs come from.
	PodCIDR string
	// MultusCIDR is where secondary network IPs come from; each
	// NetworkAttachmentDefinition gets its own /24 in it.
	MultusCIDR string
}

// DefaultOptions are quick, but not instant, latencies.
func DefaultOptions() Options {
	return Options{
		TimeScale:            0.01,
		BootDelay:            30 * time.Second,
		ImportBytesPerSecond: 50 << 20,
		ImageSize:            600 << 20,
		PodCIDR:              "10.244.0.0/16",
		MultusCIDR:           "192.168.0.0/16",
	}
}

// Simulator plays KubeVirt and CDI against one (infra) API server.
type Simulator struct {
	opts     Options
	client   client.Client
	log      logr.Logger
	Counters *Counters
	ips      *ipAllocator
	// Images says what each node image holds; tests add their own.
	Images *Catalog
	// Joiner makes a guest with valid bootstrap data join its cluster; nil
	// means guests boot but join nothing.
	Joiner Joiner
	// Provider is where the provider's connections to guests (the ssh
	// bootstrap check) come from; ProviderEndpoint unless the world says
	// otherwise.
	Provider Endpoint
	// LBBackend routes load balancer traffic; nil leaves it unrouted.
	LBBackend LoadBalancerBackend
	lb        *loadBalancer
	// lbOff leaves LoadBalancer Services without an address.
	lbOff atomic.Bool
	// lbOffIn holds the namespaces whose LoadBalancer Services get no
	// address (SetLoadBalancerIn).
	lbOffIn sync.Map
	// importTimes holds, by namespace, how long image imports take there
	// (SetImportTime).
	importTimes sync.Map
	// handler writes what virt-handler writes, as its service account.
	handler client.Client
	// booted holds, by VMI UID, the outcome of each guest this simulator
	// booted or resumed.
	booted sync.Map
	// agents says, by VMI UID, whether the guest runs the guest agent.
	agents sync.Map
	// probes says, by VMI UID, whether the guest answers its readiness
	// probe.
	probes sync.Map
	// guests holds the sshd of booted guests, for DialGuest.
	guests guestSSH
	// failedNodes holds the names of the nodes FailNode killed.
	failedNodes sync.Map
	// busyGuests holds, by namespace and name, the VMIs whose guests dirty
	// memory faster than a migration copies it (BusyGuest).
	busyGuests sync.Map
	// config reaches the infra API server as an administrator, which may
	// impersonate a pod's service account.
	config *rest.Config
	// accounts holds clients acting as pods' service accounts, by user.
	accounts sync.Map
	// kubeletResync hands the kubelet the pods of a node that came back,
	// which it looks at again as a restarted kubelet does.
	kubeletResync chan event.GenericEvent
}

// New returns a simulator; call SetupWithManager to run it.
func New(opts Options) *Simulator {
	return &Simulator{opts: opts, Counters: NewCounters(), ips: newIPAllocator(opts.PodCIDR, opts.MultusCIDR), lb: newLoadBalancer(), Images: NewCatalog(), Provider: ProviderEndpoint,
		kubeletResync: make(chan event.GenericEvent)}
}

// scaled converts a simulated latency into wall-clock time.
func (s *Simulator) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.opts.TimeScale)
}

// SetupWithManager registers the simulator's controllers with mgr, whose
// client reaches the infra API server as an administrator; handler reaches
// it as virt-handler's service account.
func (s *Simulator) SetupWithManager(mgr ctrl.Manager, handler client.Client) error {
	s.client = mgr.GetClient()
	s.config = mgr.GetConfig()
	s.handler = handler
	s.log = mgr.GetLogger().WithName("sim")
	for _, setup := range []func(ctrl.Manager) error{
		s.setupHandler, s.setupKubelet, s.setupUnrunPods, s.setupCDIPods, s.setupStorageAdmin,
		s.setupProvisioner, s.setupResizer, s.setupVolumeReclaimer, s.setupSnapshotter, s.setupLoadBalancer,
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// Close releases what the simulator holds outside the API server: the load
// balancer's listeners and the guests' SSH servers.
func (s *Simulator) Close() error {
	s.stopAllSSH()
	return s.lb.Close()
}
