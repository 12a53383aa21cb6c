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

package evacuation

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
	"github.com/capkv/cluster-api-provider-kubevirt/pkg/vm/vmstatus"
)

// MigrationLabel marks a VirtualMachineInstanceMigration the
// provider created to move a VM off a draining infra node; its value is
// the KubevirtMachine's name.
const MigrationLabel = "capkv.io/evacuation-of"

// migrationStep is what an evacuation does about live migration next.
type migrationStep int

const (
	// migrationSkipped: no live migration (not migratable, switched off,
	// or abandoned); the tenant Node is drained instead.
	migrationSkipped migrationStep = iota
	// migrationStart: create the migration.
	migrationStart
	// migrationWait: the migration runs; KubeVirt reports its end on the
	// instance.
	migrationWait
	// migrationAbandon: the migration failed or took too long; cancel it
	// and drain the tenant Node instead.
	migrationAbandon
)

// nextMigrationStep decides, from the evacuation's record and the instance,
// what to do about live migration; why explains an abandon.
func nextMigrationStep(ev *infrav1.EvacuationStatus, vmi *kubevirtv1.VirtualMachineInstance, timeout time.Duration, now time.Time) (step migrationStep, why string) {
	if ev.MigrationAbandoned || timeout <= 0 {
		return migrationSkipped, ""
	}
	deadline := ev.StartTime.Add(timeout)
	if ev.MigrationUID == "" {
		if !migratable(vmi) || !now.Before(deadline) {
			return migrationSkipped, ""
		}
		return migrationStart, ""
	}
	if m := vmi.Status.MigrationState; m != nil && string(m.MigrationUID) == ev.MigrationUID {
		switch {
		case m.Failed:
			why = "failed"
			if m.FailureReason != "" {
				why += ": " + m.FailureReason
			}
			return migrationAbandon, why
		case m.Completed:
			return migrationWait, ""
		}
	}
	if !now.Before(deadline) {
		return migrationAbandon, fmt.Sprintf("did not complete within liveMigrationTimeoutSeconds (%s)", timeout)
	}
	return migrationWait, ""
}

// migrationUnderWay says whether the migration this evacuation started is
// still neither completed nor failed on the instance.
func migrationUnderWay(vmi *kubevirtv1.VirtualMachineInstance, ev *infrav1.EvacuationStatus) bool {
	m := vmi.Status.MigrationState
	return ev.MigrationUID != "" && !ev.MigrationAbandoned && m != nil &&
		string(m.MigrationUID) == ev.MigrationUID && !m.Completed && !m.Failed
}

// migrationReportDue is how long to wait for KubeVirt to report the
// migration this evacuation started completed or failed: 0 when it did, or
// when liveMigrationTimeoutSeconds is past and the evacuation ends anyway.
func migrationReportDue(km *infrav1.KubevirtMachine, vmi *kubevirtv1.VirtualMachineInstance, ev *infrav1.EvacuationStatus, now time.Time) time.Duration {
	if !migrationUnderWay(vmi, ev) {
		return 0
	}
	return max(ev.StartTime.Add(migrationTimeout(km)).Sub(now), 0)
}

// migrationTimeout is the machine's liveMigrationTimeoutSeconds.
func migrationTimeout(km *infrav1.KubevirtMachine) time.Duration {
	return time.Duration(ptr.Deref(km.Spec.Evacuation.LiveMigrationTimeoutSeconds, 600)) * time.Second
}

// migratable says whether KubeVirt says the instance can live migrate.
func migratable(vmi *kubevirtv1.VirtualMachineInstance) bool {
	c, ok := vmstatus.LiveMigratable(vmi)
	return ok && c.Status == metav1.ConditionTrue
}

// migrateFirst live migrates a LiveMigratable VM off the draining infra
// node before anything in the tenant cluster is touched. It reports
// whether the migration is still under way (the caller waits) and when
// to look again, where no event of the instance will say.
func (s *Evacuator) migrateFirst(ctx context.Context, sc *Target, vmi *kubevirtv1.VirtualMachineInstance, ev *infrav1.EvacuationStatus) (bool, time.Duration, error) {
	km := sc.KubevirtMachine
	timeout := migrationTimeout(km)
	step, why := nextMigrationStep(ev, vmi, timeout, time.Now())
	deadline := ev.StartTime.Add(timeout)
	switch step {
	case migrationSkipped:
		// Decided once: a VM that becomes migratable while its tenant Node
		// drains is not migrated halfway through.
		ev.MigrationAbandoned = true
		return false, 0, nil
	case migrationAbandon:
		if err := s.cancelMigration(ctx, sc, vmi.Namespace, ev); err != nil {
			return false, 0, err
		}
		ev.MigrationAbandoned = true
		s.Recorder.Eventf(km, vmi, corev1.EventTypeWarning, "LiveMigrationAbandoned", "Evacuate",
			"live migration %s of the VM off infra node %s %s; draining tenant Node %s instead",
			ev.MigrationName, ev.InfraNodeName, why, orNone(ev.TenantNodeName))
		return false, 0, nil
	case migrationStart:
		if err := s.startMigration(ctx, sc, vmi, ev); err != nil {
			return false, 0, err
		}
	}
	sc.Evacuating.Record(metav1.ConditionTrue, infrav1.LiveMigratingReason, fmt.Sprintf(
		"infra node %s is draining; live migrating the VM (migration %s); if it has not moved by %s, tenant Node %s is drained instead",
		ev.InfraNodeName, ev.MigrationName, deadline.UTC().Format(time.RFC3339), orNone(ev.TenantNodeName)))
	return true, max(time.Until(deadline), 0) + time.Second, nil
}

// startMigration creates the migration, named after the evacuation so that
// a retry finds the one it created, and owned by the instance so that it
// goes with it.
func (s *Evacuator) startMigration(ctx context.Context, sc *Target, vmi *kubevirtv1.VirtualMachineInstance, ev *infrav1.EvacuationStatus) error {
	infra := sc.Infra
	name := vmi.Name
	if len(name) > 50 {
		name = name[:50]
	}
	m := &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-evac-" + strconv.FormatInt(ev.StartTime.Unix(), 36), Namespace: vmi.Namespace,
			Labels: map[string]string{MigrationLabel: sc.KubevirtMachine.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: kubevirtv1.SchemeGroupVersion.String(),
				Kind: "VirtualMachineInstance", Name: vmi.Name, UID: vmi.UID}},
		},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmi.Name},
	}
	err := infra.Client.Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		err = infra.APIReader.Get(ctx, client.ObjectKeyFromObject(m), m)
	}
	if err != nil {
		return fmt.Errorf("creating VirtualMachineInstanceMigration %s/%s to move the VM off infra node %s: %w",
			m.Namespace, m.Name, ev.InfraNodeName, err)
	}
	ev.MigrationName, ev.MigrationUID = m.Name, string(m.UID)
	return nil
}

// cancelMigration deletes the migration; KubeVirt aborts one that is still
// running and the VM stays where it is.
func (s *Evacuator) cancelMigration(ctx context.Context, sc *Target, namespace string, ev *infrav1.EvacuationStatus) error {
	m := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: ev.MigrationName, Namespace: namespace}}
	if err := sc.Infra.Client.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("cancelling VirtualMachineInstanceMigration %s/%s: %w", namespace, ev.MigrationName, err)
	}
	return nil
}

func orNone(name string) string {
	if name == "" {
		return "(none)"
	}
	return name
}
