package provider

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Staging: the load balancer's configuration before the address.
//
// MetalLB's controller allocates the address a Service asks for
// (spec.loadBalancerIP, metallb.io/loadBalancerIPs) from a pool it has; an
// address with no pool yet gets AllocationFailed and waits for the next
// change of MetalLB's configuration, when it reprocesses every Service.
// The pool is what the module writes for the address, and the module's
// input is the Services as they show their addresses: written in that
// order, every new Service of a burst asked before its pool was there,
// and waited seconds for MetalLB to work through its reprocessing. So the
// CCM stages the addresses it is about to write into a Service: they enter
// the module's view first (lbsnapshot.Input.Staged), and the write waits
// (up to stageWait) for a module sync that has them.

// stageWait bounds how long writing a Service's address waits for the
// module. In a burst of 50 new Services the syncs take up to about a
// second each, and the one a staged Service waits for is the one still
// reading, or else starts a quarter of the debounce after the last began,
// so a Service staged just after a sync's snapshot waits up to about two
// seconds; a failed sync ends
// the wait at once; a slow module (thousands of Services) delays the
// address by at most this much, never holds it back.
const stageWait = 5 * time.Second

// stagedTTL is how long a staged address stays in the module's view while
// the Service does not show it: long enough for the write and the
// informer's event, short enough that an address whose write failed (the
// Service is retried, and stages it again) is not kept.
const stagedTTL = time.Minute

// stagedAddresses are the addresses staged per Service (by UID).
type stagedAddresses struct {
	mu  sync.Mutex
	m   map[types.UID]stagedEntry
	now func() time.Time
}

type stagedEntry struct {
	ips []string
	at  time.Time
}

func (s *stagedAddresses) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// put stages ips for the Service with uid.
func (s *stagedAddresses) put(uid types.UID, ips []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.UID]stagedEntry{}
	}
	now := s.clock()
	for k, e := range s.m {
		if now.Sub(e.at) > stagedTTL {
			delete(s.m, k)
		}
	}
	s.m[uid] = stagedEntry{ips: slices.Clone(ips), at: now}
}

// get is lbsnapshot.Input.Staged: the addresses staged for svc, unless
// expired.
func (s *stagedAddresses) get(svc *v1.Service) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[svc.UID]
	if !ok || s.clock().Sub(e.at) > stagedTTL {
		return nil
	}
	return e.ips
}

// stage is eip.Manager's BeforePublish: it stages ips for svc and waits
// (up to stageWait) for the module loop, if it runs, to sync with them.
func (lb *loadBalancer) stage(ctx context.Context, svc *v1.Service, ips []string) {
	lb.staged.put(svc.UID, ips)
	f := lb.awaitSync.Load()
	if f == nil {
		return // no module loop (yet): the Service's event will start its sync
	}
	ctx, cancel := context.WithTimeout(ctx, stageWait)
	defer cancel()
	began := time.Now()
	if !(*f)(ctx) {
		klog.V(2).InfoS("Writing the Service's address without waiting longer for the load-balancer module", "service", klog.KObj(svc), "ips", ips, "waited", time.Since(began).Round(time.Millisecond))
	}
}
