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

package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"strings"
	"time"

	ignition "github.com/coreos/ignition/v2/config"
	ignitionv2 "github.com/flatcar/ignition/config/v2_3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"
)

// GuestAnnotation records on the VMI what the simulated guest did with its
// bootstrap data: "joined", "no-bootstrap-data" or "bootstrap-failed: why".
const GuestAnnotation = "sim.capkv.io/guest"

// Bootstrap is the data a guest booted with.
type Bootstrap struct {
	// Format is "cloud-config" or "ignition".
	Format string
	// Data is the user data as the guest read it.
	Data []byte
	// Kubelet is the version of the kubeadm and kubelet the guest runs,
	// from its image or installed by the data.
	Kubelet string
	// Init says the data runs "kubeadm init" rather than "kubeadm join".
	Init bool
}

// Joiner makes a booted guest join its workload cluster: a Node with its
// provider ID, and for control-plane machines what kubeadm would start.
type Joiner interface {
	Join(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, data Bootstrap) error
}

// UnreachableError says the network dropped a joining guest's connections
// to its control plane (Simulator.Reachable). kubeadm join retries its
// discovery until kubeadmDiscoveryTimeout, then fails.
type UnreachableError struct {
	// From is the guest's endpoint; To the address kubeadm dials.
	From, To string
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("kubeadm join: %s could not reach the control plane at %s within %s: i/o timeout", e.From, e.To, kubeadmDiscoveryTimeout)
}

// kubeadm join's discovery timeout and retry interval, by default
// (discovery.timeout in kubeadm's v1beta3 JoinConfiguration, timeouts.discovery
// in v1beta4; constants.DiscoveryRetryInterval).
const (
	kubeadmDiscoveryTimeout       = 5 * time.Minute
	kubeadmDiscoveryRetryInterval = 5 * time.Second
)

// minDiscoveryRetry keeps a scaled-down retry from spinning.
const minDiscoveryRetry = 250 * time.Millisecond

// errJoinRetrying says kubeadm is still retrying an unreachable control
// plane.
var errJoinRetrying = errors.New("kubeadm join is retrying its discovery")

// bootGuest simulates the guest OS once the VMI runs: after the boot delay it
// reads its user data the way cloud-init or Ignition would, and with valid
// data joins its cluster. Invalid data leaves a running VM that never joins,
// as in real life.
func (s *Simulator) bootGuest(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (reconcile.Result, error) {
	if outcome, done := vmi.Annotations[GuestAnnotation]; done {
		return reconcile.Result{}, s.resumeGuest(ctx, vmi, outcome)
	}
	if outcome, booted := s.booted.Load(vmi.UID); booted {
		// Booted already; only reporting it failed (a conflicting write).
		return s.reportBoot(ctx, vmi, outcome.(string))
	}
	if wait := s.scaled(s.opts.BootDelay) - time.Since(runningSince(vmi)); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	data, err := s.userData(ctx, vmi)
	if err != nil {
		return reconcile.Result{}, err
	}
	ref, err := s.rootImage(ctx, vmi)
	if err != nil {
		return reconcile.Result{}, err
	}
	img, known := s.Images.Lookup(ref)
	outcome, err := s.runBootstrap(ctx, vmi, data, ref, img, known)
	if errors.Is(err, errJoinRetrying) {
		return reconcile.Result{RequeueAfter: max(s.scaled(kubeadmDiscoveryRetryInterval), minDiscoveryRetry)}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	// The guest's sshd comes up with the keys its user data installed.
	s.startSSH(vmi, data, outcome)
	s.booted.Store(vmi.UID, outcome)
	s.agents.Store(vmi.UID, known && img.GuestAgent)
	s.probes.Store(vmi.UID, answersProbe(vmi, known && img.GuestAgent, filesOf(data, outcome)))
	return s.reportBoot(ctx, vmi, outcome)
}

// runBootstrap runs the bootstrap data as the guest would and returns the
// outcome: a guest whose data runs kubeadm joins its cluster only when
// kubeadm and a container runtime are there (in the image, or installed by
// the data) and kubeadm accepts the version skew; otherwise it boots and
// never joins (docs/simulator.md#the-image-catalog).
func (s *Simulator) runBootstrap(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, data *Bootstrap, ref string, img Image, known bool) (string, error) {
	if data == nil {
		return "no-bootstrap-data", nil
	}
	if verr := validateUserData(data); verr != nil {
		s.Counters.Add(GuestBootFailures, 1)
		return "bootstrap-failed: " + verr.Error(), nil
	}
	text := bootstrapText(data)
	if !runsKubeadm(text) {
		return "booted", nil
	}
	err := s.joinWithKubeadm(ctx, vmi, data, ref, img, known)
	if err == nil && s.Joiner != nil {
		s.Counters.Add(GuestsJoined, 1)
	}
	var unreachable *UnreachableError
	if errors.As(err, &unreachable) {
		if time.Since(runningSince(vmi)) < s.scaled(s.opts.BootDelay+kubeadmDiscoveryTimeout) {
			return "", errJoinRetrying
		}
		s.Counters.Add(GuestBootFailures, 1)
		return "bootstrap-failed: " + unreachable.Error(), nil
	}
	var refusal *KubeadmRefusedError
	if errors.As(err, &refusal) {
		s.Counters.Add(GuestBootFailures, 1)
		return "bootstrap-failed: " + refusal.Reason, nil
	}
	if err != nil {
		return "", fmt.Errorf("guest of %s joining its cluster: %w", vmi.Name, err)
	}
	return "joined", nil
}

// reportBoot records the guest's outcome on the VMI and the guest agent's
// connection, as virt-handler reports it, then has the kubelet probe the
// launcher pod again. A write that lost a race with virt-controller is
// tried again with the VMI as it is now.
func (s *Simulator) reportBoot(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, outcome string) (reconcile.Result, error) {
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	vmi.Annotations[GuestAnnotation] = outcome
	if agent, _ := s.agents.Load(vmi.UID); agent == true {
		setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue})
	}
	if err := s.handler.Update(ctx, vmi); apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	} else if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, s.probeLauncher(ctx, vmi)
}

// answersProbe says whether a booted guest passes its VMI's readiness
// probe, both kinds of which KubeVirt runs through the guest agent: the
// agent answers a ping; an exec probe's command runs in the guest
// (runInGuest) and passes when it exits 0, as virt-probe's guest-exec
// does.
func answersProbe(vmi *kubevirtv1.VirtualMachineInstance, agent bool, files guestFiles) bool {
	p := vmi.Spec.ReadinessProbe
	if p == nil || !agent {
		return false
	}
	if p.Exec != nil {
		status, _ := runInGuest(probeCommand(p.Exec.Command), files)
		return status == 0
	}
	return p.GuestAgentPing != nil
}

// probeLauncher has the kubelet run the launcher pod's readiness probe
// again now that the guest may answer it.
func (s *Simulator) probeLauncher(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	pod, err := s.launcherPod(ctx, vmi)
	if err != nil || pod == nil {
		return err
	}
	before := pod.Status.DeepCopy()
	s.syncReadiness(pod)
	if equality.Semantic.DeepEqual(before, &pod.Status) {
		return nil
	}
	return client.IgnoreNotFound(s.client.Status().Update(ctx, pod))
}

// resumeGuest brings back, once per simulator, what a guest that booted
// under an earlier simulator holds outside the API server: its place in
// its in-memory tenant cluster and its sshd. That happens when the world
// restarts from kept state (sandbox --keep-state) with the VMI running.
func (s *Simulator) resumeGuest(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, outcome string) error {
	if _, seen := s.booted.LoadOrStore(vmi.UID, outcome); seen {
		return nil
	}
	agent := vmiConditionTrue(vmi, kubevirtv1.VirtualMachineInstanceAgentConnected)
	s.agents.Store(vmi.UID, agent)
	data, err := s.userData(ctx, vmi)
	s.probes.Store(vmi.UID, answersProbe(vmi, agent, filesOf(data, outcome)))
	if err == nil && data != nil && outcome == "joined" && s.Joiner != nil {
		err = s.rejoin(ctx, vmi, data)
	}
	if err != nil {
		s.booted.Delete(vmi.UID)
		return fmt.Errorf("resuming the guest of %s: %w", vmi.Name, err)
	}
	s.startSSH(vmi, data, outcome)
	return nil
}

// rejoin puts a guest that joined under an earlier simulator back into its
// cluster with the kubelet it had.
func (s *Simulator) rejoin(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, data *Bootstrap) error {
	ref, err := s.rootImage(ctx, vmi)
	if err != nil {
		return err
	}
	img, known := s.Images.Lookup(ref)
	return s.joinWithKubeadm(ctx, vmi, data, ref, img, known)
}

// joinWithKubeadm runs kubeadm in the guest as its image and data allow,
// then has the Joiner (when there is one) make it a Node with the kubelet
// it runs. A *KubeadmRefusedError says kubeadm could not run or refused.
func (s *Simulator) joinWithKubeadm(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, data *Bootstrap, ref string, img Image, known bool) error {
	text := bootstrapText(data)
	kubelet, err := guestKubeadm(ref, img, known, data, text)
	if err != nil || s.Joiner == nil {
		return err
	}
	withKubelet := *data
	withKubelet.Kubelet, withKubelet.Init = kubelet, strings.Contains(text, "kubeadm init")
	return s.Joiner.Join(ctx, vmi, withKubelet)
}

func runningSince(vmi *kubevirtv1.VirtualMachineInstance) time.Time {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running {
			return t.PhaseTransitionTimestamp.Time
		}
	}
	return time.Now()
}

// userData finds the bootstrap data: the Ignition annotation, else the first
// NoCloud or ConfigDrive volume in list order, from inline data or its
// Secret. See docs/kubevirt-behaviour.md#the-ignition-annotation,
// docs/kubevirt-behaviour.md#volumes-and-disks-pair-by-name,
// docs/kubevirt-behaviour.md#cloud-init-data-sources-and-size-limits and
// docs/kubevirt-behaviour.md#cloud-init-secret-keys.
func (s *Simulator) userData(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*Bootstrap, error) {
	if ign, ok := vmi.Annotations["kubevirt.io/ignitiondata"]; ok && strings.Contains(ign, "ignition") {
		return &Bootstrap{Format: "ignition", Data: []byte(ign)}, nil
	}
	for _, v := range vmi.Spec.Volumes {
		var inline, inline64 string
		var ref *corev1.LocalObjectReference
		switch {
		case v.CloudInitNoCloud != nil:
			inline, inline64, ref = v.CloudInitNoCloud.UserData, v.CloudInitNoCloud.UserDataBase64, v.CloudInitNoCloud.UserDataSecretRef
		case v.CloudInitConfigDrive != nil:
			inline, inline64, ref = v.CloudInitConfigDrive.UserData, v.CloudInitConfigDrive.UserDataBase64, v.CloudInitConfigDrive.UserDataSecretRef
		default:
			continue
		}
		var data []byte
		switch {
		case ref != nil:
			secret := &corev1.Secret{}
			if err := s.client.Get(ctx, types.NamespacedName{Namespace: vmi.Namespace, Name: ref.Name}, secret); err != nil {
				return nil, fmt.Errorf("reading user data Secret %s: %w", ref.Name, err)
			}
			var ok bool
			if data, ok = secret.Data["userdata"]; !ok {
				data, ok = secret.Data["userData"]
			}
			if !ok {
				// The launcher fails without either key
				// (docs/kubevirt-behaviour.md#cloud-init-secret-keys).
				return &Bootstrap{Format: "none"}, nil
			}
		case inline64 != "":
			decoded, err := base64.StdEncoding.DecodeString(inline64)
			if err != nil {
				return &Bootstrap{Format: "none"}, nil
			}
			data = decoded
		default:
			data = []byte(inline)
		}
		return &Bootstrap{Format: formatOf(data), Data: data}, nil
	}
	return nil, nil
}

func formatOf(data []byte) string {
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return "ignition"
	}
	return "cloud-config"
}

// validateUserData parses the data as the guest would: #cloud-config as
// YAML, Ignition with the Ignition config parser, multipart MIME part by
// part, shell scripts as they are.
func validateUserData(b *Bootstrap) error {
	switch b.Format {
	case "none":
		return errors.New("no cloud-init data-source found")
	case "ignition":
		// Flatcar still reads spec 2.x, which Cluster API's kubeadm
		// bootstrap provider emits; Fedora CoreOS and current Flatcar read
		// spec 3.x.
		var version struct {
			Ignition struct{ Version string } `json:"ignition"`
		}
		if err := json.Unmarshal(b.Data, &version); err != nil {
			return fmt.Errorf("invalid Ignition config: %w", err)
		}
		if strings.HasPrefix(version.Ignition.Version, "2.") {
			if _, rpt, err := ignitionv2.Parse(b.Data); err != nil {
				return fmt.Errorf("invalid Ignition spec 2 config: %w %s", err, rpt.String())
			}
			return nil
		}
		if _, rpt, err := ignition.Parse(b.Data); err != nil {
			return fmt.Errorf("invalid Ignition config: %w %s", err, rpt.String())
		}
		return nil
	}
	return validateCloudInitPart(b.Data, "")
}

// jinjaExpression is a cloud-init Jinja expression, such as
// {{ ds.meta_data.local_hostname }}.
var jinjaExpression = regexp.MustCompile(`\{\{[^}]*\}\}`)

func validateCloudInitPart(data []byte, contentType string) error {
	text := strings.TrimLeft(string(data), " \t\r\n")
	if first, rest, ok := strings.Cut(text, "\n"); ok && strings.EqualFold(strings.TrimSpace(first), "## template: jinja") {
		// cloud-init renders the template (CABPK's user data is one), then
		// handles the result by its own header; expressions render to
		// plain values.
		return validateCloudInitPart(jinjaExpression.ReplaceAll([]byte(rest), []byte("rendered")), contentType)
	}
	switch {
	case strings.HasPrefix(text, "#cloud-config") || contentType == "text/cloud-config":
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("cloud-config is not valid YAML: %w", err)
		}
		return nil
	case strings.HasPrefix(text, "#!") || contentType == "text/x-shellscript":
		return nil
	case strings.HasPrefix(strings.ToLower(text), "content-type:") || strings.HasPrefix(strings.ToLower(text), "mime-version:"):
		return validateMultipart(data)
	}
	return errors.New("user data is neither #cloud-config, a script, nor multipart MIME")
}

func validateMultipart(data []byte) error {
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("multipart user data: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return fmt.Errorf("multipart user data has content type %q", msg.Header.Get("Content-Type"))
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	parts := 0
	for {
		part, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("multipart user data: %w", err)
		}
		// cloud-init decodes a base64 part before it looks at it.
		body, err := decodeTransfer(part.Header.Get("Content-Transfer-Encoding"), part)
		if err != nil {
			return fmt.Errorf("part %d: %w", parts+1, err)
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err := validateCloudInitPart(body, ct); err != nil {
			return fmt.Errorf("part %d: %w", parts+1, err)
		}
		parts++
	}
	if parts == 0 {
		return errors.New("multipart user data has no parts")
	}
	return nil
}
