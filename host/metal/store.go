package metal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/client-go/tools/cache"
)

// store is one cache: an indexed set of API objects (client-go's thread-safe
// Indexer) that is replaced in full by a listing ("refresh") and edited by
// our own writes in between.
//
// Two races are handled here rather than by callers:
//
//   - Refreshes are collapsed: one listing at a time (singleflight), shared by
//     every caller that is happy with it. A caller that needs data newer than
//     the moment it started (fresh reads, see refresh) gets a listing that
//     started after it did: either one already in flight that started later,
//     or the next one.
//   - A listing that started before one of our writes must not undo it when it
//     lands (the new reservation would vanish from the cache, a deleted one
//     come back). Writes made while a listing is in flight are journaled and
//     replayed on top of its result.
type store struct {
	name    string
	keyFunc cache.KeyFunc
	idx     cache.Indexer

	mu        sync.Mutex
	loaded    bool
	flights   uint64 // listings started so far; a listing's number is its position
	completed uint64 // number of the latest listing applied to idx
	inFlight  bool
	journal   []journalEntry

	sf singleflight.Group
}

type journalEntry struct {
	key    string
	obj    any // nil for a delete
	delete bool
}

func newStore(name string, keyFunc cache.KeyFunc, indexers cache.Indexers) *store {
	return &store{name: name, keyFunc: keyFunc, idx: cache.NewIndexer(keyFunc, indexers)}
}

// isLoaded tells whether the store has ever been filled by a listing; an
// empty unloaded store knows nothing, which is not the same as "no objects".
func (s *store) isLoaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// ticket is the number of listings started so far; refresh(ctx, ticket, …)
// returns only after a listing numbered above it has landed.
func (s *store) ticket() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flights
}

// joinTicket is the ticket for "the listing running now, or the next one":
// it lets a caller share a listing already under way instead of waiting for
// one that starts after it, when what it must see is older than that listing.
func (s *store) joinTicket() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight {
		return s.flights - 1
	}
	return s.flights
}

// upsert records the result of one of our writes or of a single GET.
func (s *store) upsert(obj any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.idx.Update(obj)
	if s.inFlight {
		if k, err := s.keyFunc(obj); err == nil {
			s.journal = append(s.journal, journalEntry{key: k, obj: obj})
		}
	}
	cacheObjects.WithLabelValues(s.name).Set(float64(len(s.idx.ListKeys())))
}

// remove records a deletion (ours, or a 404 from a single GET).
func (s *store) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if obj, ok, _ := s.idx.GetByKey(key); ok {
		_ = s.idx.Delete(obj)
	}
	if s.inFlight {
		s.journal = append(s.journal, journalEntry{key: key, delete: true})
	}
	cacheObjects.WithLabelValues(s.name).Set(float64(len(s.idx.ListKeys())))
}

// refresh makes sure the store holds the result of a listing numbered above
// after, running list if needed. Pass after = s.ticket() taken when the
// caller's operation began to demand data at least that fresh; pass 0 to
// accept any listing already applied (no call once the store is loaded).
//
// The listing runs with a context detached from the caller's cancellation
// (values kept), bounded by timeout: a caller that gives up does not waste
// the work for the others waiting on the same listing.
func (s *store) refresh(ctx context.Context, after uint64, timeout time.Duration, list func(context.Context) ([]any, error)) error {
	for range 3 {
		s.mu.Lock()
		done := s.completed > after
		s.mu.Unlock()
		if done {
			// A listing that started after the caller's ticket has landed
			// (perhaps while this caller was waiting for an older one).
			return nil
		}
		ch := s.sf.DoChan("refresh", func() (any, error) {
			s.mu.Lock()
			s.flights++
			n := s.flights
			s.inFlight = true
			s.journal = nil
			s.mu.Unlock()

			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			objs, err := list(lctx)

			s.mu.Lock()
			defer s.mu.Unlock()
			s.inFlight = false
			journal := s.journal
			s.journal = nil
			if err != nil {
				cacheRefreshes.WithLabelValues(s.name, "error").Inc()
				return n, err
			}
			if err := s.idx.Replace(objs, ""); err != nil {
				return n, fmt.Errorf("filling the %s cache: %w", s.name, err)
			}
			for _, j := range journal {
				if j.delete {
					if obj, ok, _ := s.idx.GetByKey(j.key); ok {
						_ = s.idx.Delete(obj)
					}
				} else {
					_ = s.idx.Update(j.obj)
				}
			}
			s.loaded = true
			s.completed = n
			cacheRefreshes.WithLabelValues(s.name, "success").Inc()
			cacheObjects.WithLabelValues(s.name).Set(float64(len(s.idx.ListKeys())))
			return n, nil
		})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-ch:
			if r.Err != nil {
				return r.Err
			}
			if r.Val.(uint64) > after {
				return nil
			}
			// That listing started before the caller did; the next one cannot.
		}
	}
	return fmt.Errorf("the %s cache could not get a listing newer than the request", s.name)
}
