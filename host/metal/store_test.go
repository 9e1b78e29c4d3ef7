package metal

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/equinix/equinix-sdk-go/services/metalv1"
)

func res(id string, tags ...string) *resv {
	return compactReservation(&metalv1.IPReservation{Id: metalv1.PtrString(id), Type: metalv1.IPRESERVATIONTYPE_PUBLIC_IPV4, Tags: tags})
}

func ids(objs []any) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		k, _ := idKey(o)
		out[k] = true
	}
	return out
}

// A listing that started before our write must not undo it when it lands.
func TestStoreReplaysWritesMadeDuringARefresh(t *testing.T) {
	s := newReservationStore()
	ctx := context.Background()
	if err := s.refresh(ctx, 0, time.Minute, func(context.Context) ([]any, error) {
		return []any{res("old", "a"), res("doomed", "a")}, nil
	}); err != nil {
		t.Fatal(err)
	}

	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- s.refresh(ctx, s.ticket(), time.Minute, func(context.Context) ([]any, error) {
			close(started)
			<-release
			// What the API said before our writes landed.
			return []any{res("old", "a"), res("doomed", "a")}, nil
		})
	}()
	<-started
	s.upsert(res("new", "a")) // e.g. RequestReservation
	s.remove("doomed")        // e.g. DeleteIP
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	got := ids(s.idx.List())
	want := map[string]bool{"old": true, "new": true}
	if len(got) != len(want) || !got["old"] || !got["new"] {
		t.Errorf("after refresh: %v, want %v", got, want)
	}
	byTag, _ := s.idx.ByIndex(indexTag, "a")
	if len(byTag) != 2 || s.count(indexTag, "a") != 2 {
		t.Errorf("tag index has %d entries (count %d), want 2", len(byTag), s.count(indexTag, "a"))
	}
}

// The per-tag counts follow every kind of change.
func TestStoreCounts(t *testing.T) {
	s := newReservationStore()
	_ = s.refresh(context.Background(), 0, time.Minute, func(context.Context) ([]any, error) {
		return []any{res("1", "a", "b"), res("2", "a"), res("3", "c")}, nil
	})
	steps := []struct {
		name string
		do   func()
		want map[string]int
	}{
		{"after listing", func() {}, map[string]int{"a": 2, "b": 1, "c": 1}},
		{"new object", func() { s.upsert(res("4", "a", "c")) }, map[string]int{"a": 3, "b": 1, "c": 2}},
		{"tags changed", func() { s.upsert(res("1", "c")) }, map[string]int{"a": 2, "b": 0, "c": 3}},
		{"removed", func() { s.remove("3") }, map[string]int{"a": 2, "b": 0, "c": 2}},
		{"removed twice", func() { s.remove("3") }, map[string]int{"a": 2, "b": 0, "c": 2}},
		{"unknown removed", func() { s.remove("nope") }, map[string]int{"a": 2, "b": 0, "c": 2}},
	}
	for _, st := range steps {
		st.do()
		for tag, want := range st.want {
			if got := s.count(indexTag, tag); got != want {
				t.Errorf("%s: count(%s) = %d, want %d", st.name, tag, got, want)
			}
			objs, _ := s.idx.ByIndex(indexTag, tag)
			if len(objs) != want {
				t.Errorf("%s: index(%s) has %d, count says %d", st.name, tag, len(objs), want)
			}
		}
	}
	if s.size != 3 {
		t.Errorf("size = %d, want 3", s.size)
	}
}

// Writes made between refreshes are not journaled (nothing to protect).
func TestStoreJournalOnlyDuringRefresh(t *testing.T) {
	s := newReservationStore()
	s.upsert(res("x"))
	s.remove("x")
	if len(s.journal) != 0 {
		t.Errorf("journal has %d entries outside a refresh", len(s.journal))
	}
}

// A failed listing keeps the previous contents.
func TestStoreFailedRefreshKeepsContents(t *testing.T) {
	s := newReservationStore()
	ctx := context.Background()
	_ = s.refresh(ctx, 0, time.Minute, func(context.Context) ([]any, error) { return []any{res("kept")}, nil })
	err := s.refresh(ctx, s.ticket(), time.Minute, func(context.Context) ([]any, error) { return nil, context.DeadlineExceeded })
	if err == nil {
		t.Fatal("refresh error was swallowed")
	}
	if _, ok, _ := s.idx.GetByKey("kept"); !ok || !s.isLoaded() {
		t.Error("a failed refresh dropped the cache")
	}
}

// Concurrent callers share listings, and a caller that asks for fresh data
// gets a listing that started after it asked.
func TestStoreFreshReadsShareListings(t *testing.T) {
	s := newReservationStore()
	ctx := context.Background()
	var lists atomic.Int32
	first, release := make(chan struct{}), make(chan struct{})
	list := func(context.Context) ([]any, error) {
		if lists.Add(1) == 1 {
			close(first)
			<-release
		}
		return []any{res("r")}, nil
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.refresh(ctx, s.ticket(), time.Minute, list) }()
	<-first
	// These callers ask while listing #1 is in flight: #1 started before
	// them, so they need #2, and all of them share it.
	tickets := make(chan uint64, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := s.ticket()
			tickets <- tk
			if err := s.refresh(ctx, tk, time.Minute, list); err != nil {
				t.Error(err)
			}
		}()
	}
	for range 10 {
		if tk := <-tickets; tk != 1 {
			t.Errorf("ticket taken during listing #1 = %d, want 1", tk)
		}
	}
	close(release)
	wg.Wait()
	if n := lists.Load(); n != 2 {
		t.Errorf("%d listings for 11 callers, want 2", n)
	}

	// A caller content with any data (ticket 0) does not list again.
	if err := s.refresh(ctx, 0, time.Minute, list); err != nil {
		t.Fatal(err)
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("a ticket-0 refresh of a loaded store listed again (%d listings)", n)
	}
}

// A caller that gives up does not cancel the listing others wait for.
func TestStoreCallerCancelDoesNotAbortSharedListing(t *testing.T) {
	s := newReservationStore()
	started, release := make(chan struct{}), make(chan struct{})
	var sawCancel atomic.Bool
	var once sync.Once
	list := func(ctx context.Context) ([]any, error) {
		once.Do(func() { close(started) })
		<-release
		sawCancel.Store(ctx.Err() != nil)
		return []any{res("r")}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { errc <- s.refresh(ctx, 0, time.Minute, list) }()
	<-started
	other := make(chan error)
	go func() { other <- s.refresh(context.Background(), 0, time.Minute, list) }()
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Errorf("cancelled caller got %v", err)
	}
	close(release)
	if err := <-other; err != nil {
		t.Errorf("other caller got %v", err)
	}
	if sawCancel.Load() {
		t.Error("the shared listing saw the first caller's cancellation")
	}
	if !s.isLoaded() {
		t.Error("store not loaded")
	}
}

// joinTicket is joinTicketLocked under the store's lock.
func (s *store) joinTicket() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.joinTicketLocked()
}

// joinTicket shares the listing under way; ticket waits for the next one.
func TestStoreJoinTicketSharesTheRunningListing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		strict    bool
		wantLists int32
	}{
		{"join", false, 1},
		{"strict", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newReservationStore()
			ctx := context.Background()
			var lists atomic.Int32
			first, release := make(chan struct{}), make(chan struct{})
			list := func(context.Context) ([]any, error) {
				if lists.Add(1) == 1 {
					close(first)
					<-release
				}
				return nil, nil
			}
			done := make(chan struct{})
			go func() { _ = s.refresh(ctx, s.ticket(), time.Minute, list); close(done) }()
			<-first
			tk := s.joinTicket()
			if tc.strict {
				tk = s.ticket()
			}
			errc := make(chan error)
			go func() { errc <- s.refresh(ctx, tk, time.Minute, list) }()
			close(release)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			<-done
			if n := lists.Load(); n != tc.wantLists {
				t.Errorf("%d listings, want %d", n, tc.wantLists)
			}
		})
	}
	s := newReservationStore()
	if s.joinTicket() != s.ticket() {
		t.Error("with nothing in flight, joinTicket must ask for a new listing")
	}
}

func TestListPages(t *testing.T) {
	meta := func(current, last, total int32) *metalv1.Meta {
		return &metalv1.Meta{CurrentPage: &current, LastPage: &last, Total: &total}
	}
	tests := []struct {
		name      string
		pages     [][]int // what each successive fetch returns
		metas     []*metalv1.Meta
		want      int
		wantCalls int
	}{
		{"one page", [][]int{{1, 2}}, []*metalv1.Meta{meta(1, 1, 2)}, 2, 1},
		{"three pages", [][]int{{1, 2}, {3, 4}, {5}}, []*metalv1.Meta{meta(1, 3, 5), meta(2, 3, 5), meta(3, 3, 5)}, 5, 3},
		{"no meta is one page", [][]int{{1, 2}}, []*metalv1.Meta{nil}, 2, 1},
		{"empty page stops", [][]int{{1}, {}}, []*metalv1.Meta{meta(1, 9, 1), meta(2, 9, 1)}, 1, 2},
		{"skipped item: read again once", [][]int{{1, 2}, {4}, {1, 2}, {3, 4}}, []*metalv1.Meta{meta(1, 2, 4), meta(2, 2, 4), meta(1, 2, 4), meta(2, 2, 4)}, 4, 4},
		{"still short: accept the second read", [][]int{{1}, {1}}, []*metalv1.Meta{meta(1, 1, 3), meta(1, 1, 3)}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got, err := listPages(context.Background(), func(_ context.Context, page int32) ([]int, *metalv1.Meta, error) {
				i := calls
				calls++
				return tt.pages[i], tt.metas[i], nil
			})
			if err != nil || len(got) != tt.want || calls != tt.wantCalls {
				t.Errorf("got %v (%v) in %d calls, want %d items in %d calls", got, err, calls, tt.want, tt.wantCalls)
			}
		})
	}
	_, err := listPages(context.Background(), func(context.Context, int32) ([]int, *metalv1.Meta, error) {
		return nil, nil, context.DeadlineExceeded
	})
	if err != context.DeadlineExceeded {
		t.Errorf("error = %v", err)
	}
}
