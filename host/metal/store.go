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
	// listedAt is when the latest applied listing started: the contents
	// are at least that fresh.
	listedAt time.Time
	now      func() time.Time // time.Now; tests move it
	inFlight bool
	journal  []journalEntry
	size     int
	// counted indexes keep a count per value (see count).
	counted map[string]cache.IndexFunc
	counts  map[string]map[string]int

	sf singleflight.Group
}

type journalEntry struct {
	key    string
	obj    any // nil for a delete
	delete bool
}

// newStore builds a store; the indexes named in counted also keep a count
// per value.
func newStore(name string, keyFunc cache.KeyFunc, indexers cache.Indexers, counted ...string) *store {
	s := &store{name: name, keyFunc: keyFunc, idx: cache.NewIndexer(keyFunc, indexers),
		counted: map[string]cache.IndexFunc{}, counts: map[string]map[string]int{}, now: time.Now}
	for _, c := range counted {
		s.counted[c] = indexers[c]
	}
	return s
}

// isLoaded tells whether the store has ever been filled by a listing; an
// empty unloaded store knows nothing, which is not the same as "no objects".
func (s *store) isLoaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// listingFor says whether the store holds a listing that started less than
// maxAge ago and, when it does not, the ticket for "the listing running now,
// or the next one" (see joinTicketLocked). One lock answers both: checked
// apart, a listing could land between the two questions, and the caller
// would ask for yet another one although a fresh one had just arrived.
func (s *store) listingFor(maxAge time.Duration) (fresh bool, after uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded && s.now().Sub(s.listedAt) < maxAge {
		return true, 0
	}
	return false, s.joinTicketLocked()
}

// ticket is the number of listings started so far; refresh(ctx, ticket, …)
// returns only after a listing numbered above it has landed.
func (s *store) ticket() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flights
}

// joinTicketLocked is the ticket for "the listing running now, or the next
// one": it lets a caller share a listing already under way instead of
// waiting for one that starts after it, when what it must see is older than
// that listing. s.mu must be held.
func (s *store) joinTicketLocked() uint64 {
	if s.inFlight {
		return s.flights - 1
	}
	return s.flights
}

// upsert records the result of one of our writes or of a single GET.
func (s *store) upsert(obj any) {
	dropEmptyMaps(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.keyFunc(obj)
	if err != nil {
		return
	}
	s.put(k, obj)
	if s.inFlight {
		s.journal = append(s.journal, journalEntry{key: k, obj: obj})
	}
	cacheObjects.WithLabelValues(s.name).Set(float64(s.size))
}

// remove records a deletion (ours, or a 404 from a single GET).
func (s *store) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.del(key)
	if s.inFlight {
		s.journal = append(s.journal, journalEntry{key: key, delete: true})
	}
	cacheObjects.WithLabelValues(s.name).Set(float64(s.size))
}

// put and del change idx and keep size and counts in step; s.mu is held.
func (s *store) put(key string, obj any) {
	if old, ok, _ := s.idx.GetByKey(key); ok {
		s.countObj(old, -1)
	} else {
		s.size++
	}
	_ = s.idx.Update(obj)
	s.countObj(obj, +1)
}

func (s *store) del(key string) {
	if old, ok, _ := s.idx.GetByKey(key); ok {
		s.countObj(old, -1)
		s.size--
		_ = s.idx.Delete(old)
	}
}

// countObj adds d to the counts of obj's values in the counted indexes.
func (s *store) countObj(obj any, d int) {
	for name, fn := range s.counted {
		vals, _ := fn(obj)
		for _, v := range vals {
			if s.counts[name] == nil {
				s.counts[name] = map[string]int{}
			}
			if s.counts[name][v] += d; s.counts[name][v] <= 0 {
				delete(s.counts[name], v)
			}
		}
	}
}

// count is how many objects have value in a counted index, without
// building the list (Indexer's IndexKeys sorts, ByIndex copies).
func (s *store) count(index, value string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[index][value]
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
			if s.completed > after {
				// Landed between the check above and this flight.
				n := s.completed
				s.mu.Unlock()
				return n, nil
			}
			s.flights++
			n := s.flights
			started := s.now()
			s.inFlight = true
			s.journal = nil
			s.mu.Unlock()

			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			defer cancel()
			objs, err := list(lctx)
			for _, o := range objs {
				dropEmptyMaps(o)
			}

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
			s.size = len(s.idx.ListKeys())
			s.counts = map[string]map[string]int{}
			for _, o := range s.idx.List() {
				s.countObj(o, +1)
			}
			for _, j := range journal {
				if j.delete {
					s.del(j.key)
				} else {
					s.put(j.key, j.obj)
				}
			}
			s.loaded = true
			s.completed = n
			s.listedAt = started
			cacheRefreshes.WithLabelValues(s.name, "success").Inc()
			cacheObjects.WithLabelValues(s.name).Set(float64(s.size))
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
