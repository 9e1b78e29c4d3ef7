package eip

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/lbsnapshot"
)

// Release deletes every reservation tagged for the Service, and its sharing
// key's when no other Service of the key is left (also that of a key it
// held before, see leave).
func (m *Manager) Release(ctx context.Context, svc *v1.Service) error {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return m.fail(svc, fmt.Errorf("looking up the Service's Elastic IP: %w", err))
	}
	var done []string
	for _, r := range own {
		if err := m.api.DeleteIP(ctx, r.GetId()); err != nil {
			return m.fail(svc, fmt.Errorf("releasing Elastic IP %s: %w", r.GetAddress(), err))
		}
		m.recorder.Eventf(svc, v1.EventTypeNormal, reasonReleased, "Released Elastic IP %s", r.GetAddress())
		done = append(done, r.GetAddress())
	}
	if key := lbsnapshot.SharingKey(svc); key != "" {
		addrs, err := m.releaseShared(ctx, svc, sharingTag(key))
		if err != nil {
			return err
		}
		done = append(done, addrs...)
	}
	return m.leave(ctx, svc, done...)
}

// releaseOwn deletes the reservations tagged for the Service itself; why
// completes the Event.
func (m *Manager) releaseOwn(ctx context.Context, svc *v1.Service, why string) error {
	own, err := m.api.ReservationsWithTags(ctx, Tags(m.clusterID, svc.Namespace, svc.Name)...)
	if err != nil {
		return m.fail(svc, fmt.Errorf("looking up the Service's Elastic IP: %w", err))
	}
	for _, r := range own {
		if err := m.api.DeleteIP(ctx, r.GetId()); err != nil {
			return m.fail(svc, fmt.Errorf("releasing Elastic IP %s: %w", r.GetAddress(), err))
		}
		m.recorder.Eventf(svc, v1.EventTypeNormal, reasonReleased, "Released Elastic IP %s%s", r.GetAddress(), why)
	}
	return nil
}

// leave releases the shared reservations the Service had an address of
// (status, or spec.loadBalancerIP as the CCM wrote it) other than handled
// (its address now, or those already released), when no other Service has
// their key: the Service changed or dropped its key, or is gone. Its
// current key's reservation is not left. A Service whose address did not
// change costs nothing here.
func (m *Manager) leave(ctx context.Context, svc *v1.Service, handled ...string) error {
	current := ""
	if key := lbsnapshot.SharingKey(svc); key != "" {
		current = sharingTag(key)
	}
	for _, addr := range previous(svc) {
		if slices.Contains(handled, addr) {
			continue
		}
		res, err := m.reservationAt(ctx, addr)
		if err != nil {
			return m.fail(svc, fmt.Errorf("looking up the Elastic IP %s the Service had: %w", addr, err))
		}
		if res == nil {
			continue
		}
		if tag := OwnerTag(res.Tags); strings.HasPrefix(tag, sharingTagPrefix) && tag != current {
			if _, err := m.releaseShared(ctx, svc, tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// releaseShared deletes the reservation of the sharing key whose tag is tag
// when no Service other than svc, and not being deleted, has the key
// (ownerTags). The informer answers first; before deleting, a live list
// from the API server confirms, so a Service created a moment ago that the
// informer has not seen yet is never robbed of its address.
//
// It returns the addresses of the key's reservations, released or kept.
func (m *Manager) releaseShared(ctx context.Context, svc *v1.Service, tag string) ([]string, error) {
	m.keys.LockKey(tag)
	defer func() { _ = m.keys.UnlockKey(tag) }()
	found, err := m.api.ReservationsWithTags(ctx, UsageTag, tag, ClusterTag(m.clusterID))
	if err != nil || len(found) == 0 {
		return nil, err
	}
	all, err := m.listServices(ctx)
	if err != nil {
		return nil, m.fail(svc, err)
	}
	keepers := keepersOf(all, tag, svc.UID)
	if len(keepers) == 0 {
		live, err := m.liveServices(ctx)
		if err != nil {
			return nil, m.fail(svc, fmt.Errorf("listing Services before releasing a shared Elastic IP: %w", err))
		}
		keepers = keepersOf(live, tag, svc.UID)
	}
	var addrs []string
	for _, r := range found {
		addrs = append(addrs, r.GetAddress())
		if len(keepers) > 0 {
			if slices.Contains(previous(svc), r.GetAddress()) {
				m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonShareKept, "Elastic IP %s stays reserved: Service %s (and %d more) still share it", r.GetAddress(), keepers[0], len(keepers)-1)
			}
			continue
		}
		if err := m.api.DeleteIP(ctx, r.GetId()); err != nil {
			return nil, m.fail(svc, fmt.Errorf("releasing shared Elastic IP %s: %w", r.GetAddress(), err))
		}
		klog.InfoS("Released a shared Elastic IP: no Service has its sharing key any more", "service", klog.KObj(svc), "address", r.GetAddress())
		m.recorder.Eventf(svc, v1.EventTypeNormal, reasonReleased, "Released shared Elastic IP %s: no other Service has its sharing key", r.GetAddress())
	}
	return addrs, nil
}

// keepersOf are the Services, other than the one with UID self and those
// being deleted, that own the reservations with the owner tag tag, sorted.
func keepersOf(services []*v1.Service, tag string, self types.UID) []string {
	var out []string
	for _, s := range services {
		if s.UID != self && s.DeletionTimestamp == nil && slices.Contains(ownerTags(s), tag) {
			out = append(out, id(s))
		}
	}
	slices.Sort(out)
	return out
}
