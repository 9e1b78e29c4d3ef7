// Package lbretry syncs again, at once, the Services whose load-balancer
// sync failed while the Equinix Metal API did not answer, when it answers
// again.
//
// k8s.io/cloud-provider's service controller retries a Service whose sync
// failed after an exponential backoff, from 5 s to 5 minutes, and offers
// no way to retry sooner. After an outage of minutes, a Service created or
// deleted during it had its address (or its Elastic IP released) only at
// its next retry, up to 5 minutes after the API was back. A RetryError
// with a short delay would bound that for creates only (the controller
// drops the error's type on the delete path), and every waiting Service
// would call the unreachable API each time.
//
// So the Retrier remembers which Services failed (Failed, Succeeded), and
// Retry hands each one to the service controller's own event handlers as
// if it had just been added: the controller queues it at once when it
// wants a load balancer or its cleanup. The handlers are the ones the
// controller registers on the Service informer Wrap gives it; the
// controller itself is unchanged.
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package lbretry

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Retrier is the set of Services whose last sync failed, and the service
// controller's handlers to hand them back to. The zero value is not
// usable; New makes one.
type Retrier struct {
	mu       sync.Mutex
	failed   map[cache.ObjectName]struct{}
	handlers []cache.ResourceEventHandler
	lister   corelisters.ServiceLister
}

// New returns an empty Retrier.
func New() *Retrier {
	return &Retrier{failed: map[cache.ObjectName]struct{}{}}
}

// Failed records that svc's sync failed.
func (r *Retrier) Failed(svc *v1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed[cache.MetaObjectToName(svc)] = struct{}{}
}

// Succeeded records that svc's sync succeeded.
func (r *Retrier) Succeeded(svc *v1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, cache.MetaObjectToName(svc))
}

// Retry hands every Service whose last sync failed to the service
// controller's handlers, and returns how many it handed. A Service gone
// from the informer is forgotten.
func (r *Retrier) Retry() int {
	r.mu.Lock()
	names := make([]cache.ObjectName, 0, len(r.failed))
	for n := range r.failed {
		names = append(names, n)
	}
	handlers, lister := r.handlers, r.lister
	r.mu.Unlock()
	if lister == nil {
		return 0
	}
	handed := 0
	for _, n := range names {
		svc, err := lister.Services(n.Namespace).Get(n.Name)
		if apierrors.IsNotFound(err) {
			r.forget(n)
			continue
		}
		if err != nil {
			continue
		}
		for _, h := range handlers {
			h.OnAdd(svc, false)
		}
		handed++
	}
	return handed
}

func (r *Retrier) forget(n cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, n)
}

// Wrap returns inf for the service controller: the same informer, whose
// event handlers the Retrier also keeps. Wrap it once.
func (r *Retrier) Wrap(inf coreinformers.ServiceInformer) coreinformers.ServiceInformer {
	r.mu.Lock()
	r.lister = inf.Lister()
	r.mu.Unlock()
	return &informer{ServiceInformer: inf, r: r}
}

func (r *Retrier) keep(h cache.ResourceEventHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers = append(r.handlers, h)
}

type informer struct {
	coreinformers.ServiceInformer
	r *Retrier
}

func (i *informer) Informer() cache.SharedIndexInformer {
	return &sharedInformer{SharedIndexInformer: i.ServiceInformer.Informer(), r: i.r}
}

// sharedInformer passes every handler on to the shared informer, and
// keeps it.
type sharedInformer struct {
	cache.SharedIndexInformer
	r *Retrier
}

func (s *sharedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := s.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		s.r.keep(h)
	}
	return reg, err
}

func (s *sharedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := s.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync)
	if err == nil {
		s.r.keep(h)
	}
	return reg, err
}

func (s *sharedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := s.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
	if err == nil {
		s.r.keep(h)
	}
	return reg, err
}

var _ coreinformers.ServiceInformer = (*informer)(nil)
