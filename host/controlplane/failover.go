package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Event reasons, on the external Service.
const (
	reasonMoved        = "ControlPlaneEIPMoved"
	reasonTrimmed      = "ControlPlaneEIPDuplicateRemoved"
	reasonAssigned     = "ControlPlaneEIPAssigned"
	reasonUnhealthy    = "ControlPlaneUnhealthy"
	reasonRecovered    = "ControlPlaneRecovered"
	reasonFailoverFail = "ControlPlaneEIPFailoverFailed"
	reasonEIPNotFound  = "ControlPlaneEIPNotFound"
	// reasonServiceRecreated: the external Service was deleted and created
	// again to get its loadBalancerClass (an immutable field).
	reasonServiceRecreated = "ControlPlaneServiceRecreated"
)

// execute carries out a move, assign or trim. It first re-reads the
// reservation: when the assignments are no longer those the decision was
// made on (someone else moved the EIP, or an earlier call went through
// though its answer was lost), it does nothing and the next round decides
// again on the new facts.
func (m *Manager) execute(ctx context.Context, d decision, now time.Time, fromNode string) error {
	logger := klog.FromContext(ctx)
	decidedOn := m.res.assignments
	r, err := m.metal.Reservation(ctx, m.res.id)
	if err != nil {
		return fmt.Errorf("re-reading the reservation before changing it: %w", err)
	}
	fresh := assignmentsOf(r)
	if !slices.Equal(fresh, decidedOn) {
		logger.Info("Control-plane EIP assignments changed under us; deciding again", "was", decidedOn, "now", fresh)
		m.observe(r, now)
		return nil
	}
	m.res.address = r.GetAddress()
	m.res.metro = reservationMetro(r)
	if d.Kind != trim {
		// Equinix cannot assign the EIP twice, so a move unassigns first;
		// before that, make sure the assignment that follows can be made.
		if err := m.checkTarget(ctx, d.Target); err != nil {
			return err
		}
	}
	for _, a := range d.Unassign {
		if err := m.metal.DeleteIP(ctx, a.ID); err != nil {
			return fmt.Errorf("unassigning %s from device %s: %w", m.res.address, a.DeviceID, err)
		}
		m.res.assignments = slices.DeleteFunc(m.res.assignments, func(x assignment) bool { return x.ID == a.ID })
		logger.Info("Unassigned the control-plane EIP", "eip", m.res.address, "device", a.DeviceID, "reason", d.Reason)
	}
	if d.Kind == trim {
		m.setHolder(now)
		m.event(v1.EventTypeNormal, reasonTrimmed, "Control-plane EIP %s: %s", m.res.address, d.Reason)
		metricFailovers.WithLabelValues(d.Cause).Inc()
		return nil
	}
	as, err := m.metal.AssignIP(ctx, d.Target.DeviceID, m.res.address)
	if err != nil {
		err = fmt.Errorf("assigning %s to node %s (device %s): %w", m.res.address, d.Target.Name, d.Target.DeviceID, err)
		return m.restore(ctx, d, err)
	}
	m.res.assignments = []assignment{{ID: as.GetId(), DeviceID: d.Target.DeviceID}}
	m.res.readAt = now
	first := m.firstFailure
	m.setHolder(now)
	metricFailovers.WithLabelValues(d.Cause).Inc()
	if d.Cause == causeUnhealthy && !first.IsZero() {
		metricFailoverSeconds.Observe(time.Since(first).Seconds())
	}
	m.publishHolder(d.Target.Name)
	m.setStatus(func(s *status) { s.HolderNode, s.HolderDevice, s.Assignments = d.Target.Name, d.Target.DeviceID, 1 })
	if d.Kind == assign {
		logger.Info("Assigned the control-plane EIP", "eip", m.res.address, "node", d.Target.Name, "reason", d.Reason)
		m.event(v1.EventTypeNormal, reasonAssigned, "Assigned the control-plane EIP %s to node %s: %s", m.res.address, d.Target.Name, d.Reason)
		return nil
	}
	from := fromNode
	if from == "" {
		from = "device " + d.Unassign[0].DeviceID
	}
	logger.Info("Moved the control-plane EIP", "eip", m.res.address, "from", from, "to", d.Target.Name, "reason", d.Reason)
	m.event(v1.EventTypeNormal, reasonMoved, "Moved the control-plane EIP %s from %s to node %s: %s", m.res.address, from, d.Target.Name, d.Reason)
	return nil
}

// checkTarget reads the target device fresh from Equinix and refuses a
// device that is gone or outside the EIP's metro: Equinix would answer the
// assignment with 422 after the holder had already been unassigned.
func (m *Manager) checkTarget(ctx context.Context, t nodeState) error {
	dev, err := m.metal.DeviceFresh(ctx, t.DeviceID)
	if err != nil {
		return fmt.Errorf("checking node %s (device %s) before moving the EIP there, so the EIP stays where it is: %w", t.Name, t.DeviceID, err)
	}
	if m.res.metro == "" {
		return nil
	}
	if got := dev.GetMetro().Code; got == nil || !strings.EqualFold(*got, m.res.metro) {
		where := "no metro"
		if got != nil {
			where = "metro " + *got
		}
		return fmt.Errorf("node %s (device %s) is in %s and the EIP %s in metro %s; Equinix assigns an Elastic IP only in its own metro, so the EIP stays where it is", t.Name, t.DeviceID, where, m.res.address, m.res.metro)
	}
	return nil
}

// restore puts the EIP back on the device it was moved away from when the
// new assignment failed after the old one was removed: a holder that
// failed its health checks still beats no holder at all. The next round
// decides again either way.
func (m *Manager) restore(ctx context.Context, d decision, cause error) error {
	if d.Kind != move || len(d.Unassign) != 1 {
		return cause
	}
	old := d.Unassign[0]
	as, err := m.metal.AssignIP(ctx, old.DeviceID, m.res.address)
	if err != nil {
		return fmt.Errorf("%w; putting it back on device %s failed too, so it has no assignment until the next round: %v", cause, old.DeviceID, err)
	}
	m.res.assignments = []assignment{{ID: as.GetId(), DeviceID: old.DeviceID}}
	return fmt.Errorf("%w; it is back on device %s", cause, old.DeviceID)
}

// eventOnce records a Warning unless the previous lookup recorded the same.
func (m *Manager) eventOnce(reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if msg == m.lastFindEvent {
		return
	}
	m.lastFindEvent = msg
	m.event(v1.EventTypeWarning, reason, "%s", msg)
}

// event records an Event on the external Service; before that exists
// (the EIP was not found yet) on default/kubernetes, where someone looking
// for why the control plane has no EIP would look next.
func (m *Manager) event(typ, reason, format string, args ...any) {
	if m.recorder == nil {
		return
	}
	ref := m.serviceRef
	if ref == nil {
		ref = &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: kubernetesNamespace, Name: kubernetesName}
		if src, err := m.services.Services(kubernetesNamespace).Get(kubernetesName); err == nil {
			ref.UID = src.UID
		}
	}
	m.recorder.Eventf(ref, typ, reason, format, args...)
}
