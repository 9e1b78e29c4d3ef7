package eip

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

// Event reasons of shared Elastic IPs.
const (
	// ReasonShareRefused: the Service may not have its sharing key's
	// address (ports clash, traffic policies differ, another location).
	ReasonShareRefused = "ElasticIPShareRefused"
	// ReasonShareKept: the Service let go of a shared Elastic IP that other
	// Services of the key still use, so it stays reserved.
	ReasonShareKept = "ElasticIPKept"
)

// Services is how the Manager reads the cluster's Services to know who else
// has a sharing key: List from an informer (cheap, possibly a little behind)
// and Synced, whether it has been filled. Without List, every read is a
// live, paged list from the API server.
type Services struct {
	List   func() ([]*v1.Service, error)
	Synced func() bool
}

// SetServices gives the Manager the cluster's Services (an informer).
func (m *Manager) SetServices(s Services) { m.services = s }

// ensureShared is Ensure for a Service with a sharing key: the key's one
// reservation (tags SharedTags), reserved by the first Service of the key
// where placement puts it.
//
// Everything for one key runs under the key's lock, in this process (the
// leader): two Services of one key synced at once make one reservation
// (RequestReservation would also find the first one by its tags), and a
// release never races a newcomer. A Service that does not hold the address
// yet is admitted only if it does not clash with the Services that do
// (Group: MetalLB's rule), and if placement puts it where the reservation
// is; otherwise it gets an ElasticIPShareRefused Event naming the other
// Service and an error, and the service controller retries it with backoff
// (so it gets the address once the Service in its way is gone or changed).
//
// A spec.loadBalancerIP the user set wins over the key: the Service brings
// its own address and the key only tells MetalLB which Services may share
// it, as before this CCM shared anything.
func (m *Manager) ensureShared(ctx context.Context, svc *v1.Service, key string) (string, error) {
	if lbIP := svc.Spec.LoadBalancerIP; lbIP != "" && !writtenByCCM(svc) {
		return m.ownAddress(svc, lbIP)
	}
	tags := SharedTags(m.clusterID, key)
	m.keys.LockKey(tags[1])
	defer func() { _ = m.keys.UnlockKey(tags[1]) }()

	found, err := m.api.ReservationsWithTags(ctx, tags...)
	if err != nil {
		return "", m.fail(svc, fmt.Errorf("looking up the Elastic IP of sharing key %q: %w", key, err))
	}
	res := m.pick(svc, found, fmt.Sprintf("the tags of sharing key %q", key))
	addr := ""
	if res != nil {
		addr = res.GetAddress()
	}
	all, err := m.listServices(ctx)
	if err != nil {
		return "", m.fail(svc, err)
	}
	admitted, refused := Group(keyGroup(all, svc, key, addr), addr)
	for _, r := range refused {
		if r.Service == id(svc) {
			return "", m.refuse(svc, r.Error()+"; the Service gets the address once that changes")
		}
	}
	if !holds(svc, addr) {
		loc, err := m.placer.Place(ctx, svc)
		if err != nil {
			return "", m.fail(svc, err)
		}
		if res == nil {
			if res, err = m.reserve(ctx, svc, loc, tags, key); err != nil {
				return "", err
			}
		} else if where, ok := reservedIn(res, loc); !ok {
			return "", m.refuse(svc, fmt.Sprintf("placement puts Service %s in %s, but the Elastic IP %s of sharing key %q%s is in %s; one key has one address in one place: give the Services of the key the same metro or facility, or this Service another key",
				id(svc), loc, res.GetAddress(), key, others(admitted, svc), where))
		}
	}
	if res, err = m.awaitApproval(ctx, svc, res); err != nil {
		return "", err
	}
	ip := res.GetAddress()
	if lbIP := svc.Spec.LoadBalancerIP; lbIP != "" && lbIP != ip && writtenByCCM(svc) {
		// The address the CCM gave the Service is no reservation of the
		// cluster any more (not its own, nor another key's it just left):
		// the key's reservation was released outside the CCM.
		if prev, err := m.reservationAt(ctx, lbIP); err == nil && prev == nil {
			m.reportLost(svc, lbIP, ip)
		}
	}
	if err := m.publish(ctx, svc, ip); err != nil {
		return "", err
	}
	// A Service that had an Elastic IP of its own before it took a key
	// needs it no longer.
	return ip, m.releaseOwn(ctx, svc, fmt.Sprintf("; the Service now shares %s (sharing key %q)", ip, key))
}

// refuse reports that the Service may not share its key's address.
func (m *Manager) refuse(svc *v1.Service, msg string) error {
	m.recorder.Eventf(svc, v1.EventTypeWarning, ReasonShareRefused, "%s", msg)
	return fmt.Errorf("%s", msg)
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
		m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonReleased, "Released Elastic IP %s%s", r.GetAddress(), why)
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
	if key := SharingKey(svc); key != "" {
		current = SharingTag(key)
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
// (OwnerTags). The informer answers first; before deleting, a live list
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
		m.recorder.Eventf(svc, v1.EventTypeNormal, ReasonReleased, "Released shared Elastic IP %s: no other Service has its sharing key", r.GetAddress())
	}
	return addrs, nil
}

// keepersOf are the Services, other than the one with UID self and those
// being deleted, that own the reservations with the owner tag tag, sorted.
func keepersOf(services []*v1.Service, tag string, self types.UID) []string {
	var out []string
	for _, s := range services {
		if s.UID != self && s.DeletionTimestamp == nil && slices.Contains(OwnerTags(s), tag) {
			out = append(out, id(s))
		}
	}
	slices.Sort(out)
	return out
}

// keyGroup is svc and the other Services of the key that would share addr:
// load balancers of this provider, not being deleted, and not bringing
// another address of their own.
func keyGroup(all []*v1.Service, svc *v1.Service, key, addr string) []*v1.Service {
	group := []*v1.Service{svc}
	for _, s := range all {
		if s.UID == svc.UID || s.DeletionTimestamp != nil || s.Spec.Type != v1.ServiceTypeLoadBalancer ||
			s.Spec.LoadBalancerClass != nil || SharingKey(s) != key {
			continue
		}
		if ip := s.Spec.LoadBalancerIP; ip != "" && !writtenByCCM(s) && ip != addr {
			continue
		}
		group = append(group, s)
	}
	return group
}

// others names the admitted Services other than svc, for a message.
func others(admitted []*v1.Service, svc *v1.Service) string {
	var names []string
	for _, s := range admitted {
		if s.UID != svc.UID {
			names = append(names, id(s))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (used by " + strings.Join(names, ", ") + ")"
}

// reservedIn says where res is, and whether that is loc.
func reservedIn(res *metalv1.IPReservation, loc location.Location) (string, bool) {
	if loc.Facility != "" {
		f := res.GetFacility()
		return "facility " + f.GetCode(), f.GetCode() == "" || strings.EqualFold(f.GetCode(), loc.Facility)
	}
	mt := res.GetMetro()
	return "metro " + mt.GetCode(), mt.GetCode() == "" || strings.EqualFold(mt.GetCode(), loc.Metro)
}

// previous are the addresses the Service has: its status, and
// spec.loadBalancerIP where the CCM wrote it.
func previous(svc *v1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" && !slices.Contains(out, in.IP) {
			out = append(out, in.IP)
		}
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && writtenByCCM(svc) && !slices.Contains(out, ip) {
		out = append(out, ip)
	}
	return out
}

// reservationAt is the cluster's Service reservation with address addr, if
// any (from the cache).
func (m *Manager) reservationAt(ctx context.Context, addr string) (*metalv1.IPReservation, error) {
	if addr == "" {
		return nil, nil
	}
	all, err := m.api.ReservationsWithTags(ctx, UsageTag, ClusterTag(m.clusterID))
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].GetAddress() == addr {
			return &all[i], nil
		}
	}
	return nil, nil
}

// listServices are the cluster's Services from the informer, or from the
// API server without one.
func (m *Manager) listServices(ctx context.Context) ([]*v1.Service, error) {
	if m.services.List == nil {
		return m.liveServices(ctx)
	}
	if m.services.Synced != nil && !m.services.Synced() {
		return nil, fmt.Errorf("the CCM is still reading the cluster's Services (needed to share an Elastic IP); the Service is retried")
	}
	return m.services.List()
}

// liveServices lists every Service from the API server, a page at a time.
func (m *Manager) liveServices(ctx context.Context) ([]*v1.Service, error) {
	var out []*v1.Service
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := m.kube.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}
