package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

func TestRequestReservationFindsBeforeCreating(t *testing.T) {
	tags := []string{"usage=cloud-provider-equinix-metal-auto", "service=abc", "cluster=c1"}
	t.Run("existing one is returned, no POST", func(t *testing.T) {
		f := newFakeAPI(t)
		ra := &reservationAPI{items: []map[string]any{reservation("mine", "147.75.0.9", tags...)}}
		ra.install(f)
		c := f.client()
		r, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
		if err != nil || r.GetId() != "mine" {
			t.Fatalf("RequestReservation = %v, %v", r, err)
		}
		if n := f.count("POST /projects/" + projectID + "/ips"); n != 0 {
			t.Errorf("%d POSTs, want 0", n)
		}
	})
	t.Run("created once, then found in the cache", func(t *testing.T) {
		f := newFakeAPI(t)
		ra := &reservationAPI{}
		ra.install(f)
		c := f.client()
		ctx := context.Background()
		r, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
		if err != nil || r.GetId() != "new-1" {
			t.Fatalf("RequestReservation = %v, %v", r, err)
		}
		f.resetCounts()
		got, err := c.ReservationsWithTags(ctx, tags...)
		if err != nil || len(got) != 1 || got[0].GetId() != "new-1" {
			t.Fatalf("ReservationsWithTags after create = %v, %v", got, err)
		}
		if n := f.total(); n != 0 {
			t.Errorf("lookup after our own create made %d calls, want 0", n)
		}
	})
	t.Run("503 after the API created it: found, not created twice", func(t *testing.T) {
		f := newFakeAPI(t)
		ra := &reservationAPI{postStatus: 503, createOnErr: true}
		ra.install(f)
		c := f.client()
		r, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
		if err != nil || r.GetId() != "new-1" {
			t.Fatalf("RequestReservation = %v, %v", r, err)
		}
		if n := f.count("POST /projects/" + projectID + "/ips"); n != 1 {
			t.Errorf("%d POSTs, want exactly 1", n)
		}
		if len(ra.items) != 1 {
			t.Errorf("%d reservations in the API, want 1", len(ra.items))
		}
	})
	t.Run("503 without creating: retried after a fresh lookup, then gives up", func(t *testing.T) {
		f := newFakeAPI(t)
		ra := &reservationAPI{postStatus: 503}
		ra.install(f)
		c := f.client(func(o *Options) { o.Retries = 2 })
		_, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
		want := `request IP reservation: 503 Service Unavailable: "the API is having a bad day" (gave up after 3 attempts)`
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
		posts, lists := f.count("POST /projects/"+projectID+"/ips"), f.count("GET /projects/"+projectID+"/ips")
		if posts != 3 || lists != 3 {
			t.Errorf("%d POSTs and %d listings, want 3 each (every POST preceded by a lookup)", posts, lists)
		}
	})
	t.Run("unknown outcome is remembered across calls", func(t *testing.T) {
		f := newFakeAPI(t)
		ra := &reservationAPI{postStatus: 504, createOnErr: true}
		ra.install(f)
		c := f.client(func(o *Options) { o.Retries = 0 })
		key := strings.Join(slices.Sorted(slices.Values(tags)), ",")
		if _, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags}); err == nil {
			t.Fatal("a 504 with no retries left succeeded")
		}
		if !c.uncertain(key) {
			t.Error("a 504 on create is not remembered as an unknown outcome")
		}
		r, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags})
		if err != nil || r.GetId() != "new-1" {
			t.Fatalf("second call = %v, %v; want the reservation the 504 created", r, err)
		}
		if c.uncertain(key) {
			t.Error("still uncertain after finding it")
		}
		if n := f.count("POST /projects/" + projectID + "/ips"); n != 1 {
			t.Errorf("%d POSTs, want 1", n)
		}
	})
	t.Run("422 is final", func(t *testing.T) {
		f := newFakeAPI(t)
		(&reservationAPI{}).install(f)
		f.handle("POST /projects/"+projectID+"/ips", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 422, map[string]any{"errors": []string{"metro sv has no public IPv4 available"}})
		})
		c := f.client()
		_, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "sv"}, Tags: tags})
		want := `request IP reservation: 422 Unprocessable Entity: "metro sv has no public IPv4 available"`
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
		if n := f.count("POST /projects/" + projectID + "/ips"); n != 1 {
			t.Errorf("%d POSTs, want 1", n)
		}
	})
	t.Run("concurrent requests for the same tags create one", func(t *testing.T) {
		f := newFakeAPI(t)
		ra := &reservationAPI{}
		ra.install(f)
		c := f.client()
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.RequestReservation(context.Background(), ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := f.count("POST /projects/" + projectID + "/ips"); n != 1 {
			t.Errorf("%d POSTs for 8 concurrent requests, want 1", n)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		f := newFakeAPI(t)
		c := f.client()
		for _, r := range []ReservationRequest{{Location: location.Location{Metro: "da"}}, {Tags: tags}, {Location: location.Location{Metro: "da", Facility: "da11"}, Tags: tags}} {
			if _, err := c.RequestReservation(context.Background(), r); err == nil {
				t.Errorf("RequestReservation(%+v) accepted", r)
			}
		}
		if f.total() != 0 {
			t.Error("a rejected request reached the API")
		}
	})
}

// When the reservation listing is younger than RefreshPeriod and nothing
// is uncertain, a new reservation costs its POST and nothing else; when the
// listing has aged past RefreshPeriod, the project is read again first, so
// a reservation made elsewhere in the meantime is found instead of
// duplicated.
func TestRequestReservationListsOnlyWhenNeeded(t *testing.T) {
	const period = 5 * time.Minute
	tests := []struct {
		name string
		// age of the cache's listing when the requests are made
		age time.Duration
		// made by hand after the cache was filled, with svc-0's tags
		byHand    bool
		wantPosts int
		wantLists int
		wantSvc0  string
	}{
		{name: "fresh cache: one POST per new Service", age: time.Minute, wantPosts: 100, wantLists: 0, wantSvc0: "new-1"},
		{name: "stale cache: one shared listing, then POSTs", age: period + time.Second, wantPosts: 100, wantLists: 1, wantSvc0: "new-1"},
		{name: "stale cache finds what was made by hand", age: period + time.Second, byHand: true, wantPosts: 99, wantLists: 1, wantSvc0: "by-hand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t)
			ra := &reservationAPI{}
			ra.install(f)
			c := f.client(func(o *Options) { o.RefreshPeriod = period })
			now := time.Now()
			c.reservations.now = func() time.Time { return now }
			ctx := context.Background()
			if _, err := c.ReservationsWithTags(ctx, "warm-up"); err != nil {
				t.Fatal(err)
			}
			if tt.byHand {
				ra.mu.Lock()
				ra.items = append(ra.items, reservation("by-hand", "147.75.9.9", reserveTags(0)...))
				ra.mu.Unlock()
			}
			now = now.Add(tt.age)
			f.resetCounts()

			ids := make([]string, 100)
			var wg sync.WaitGroup
			for i := range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: reserveTags(i)})
					if err != nil {
						t.Error(err)
						return
					}
					ids[i] = r.GetId()
				}()
			}
			wg.Wait()
			posts, lists := f.count("POST /projects/"+projectID+"/ips"), f.count("GET /projects/"+projectID+"/ips")
			if posts != tt.wantPosts || lists != tt.wantLists {
				t.Errorf("%d POSTs and %d listings, want %d and %d", posts, lists, tt.wantPosts, tt.wantLists)
			}
			if tt.byHand && ids[0] != tt.wantSvc0 {
				t.Errorf("svc-0 got %s, want the reservation made by hand", ids[0])
			}
			if n := len(ra.items); n != 100 {
				t.Errorf("the API holds %d reservations, want 100 (one per Service, no duplicate)", n)
			}
		})
	}
}

// A 429 is a refusal: the retry needs no listing. A 5xx may have created
// the reservation: the retry lists first and finds it.
func TestRequestReservationRetryListsOnlyAfterUnknownOutcome(t *testing.T) {
	tests := []struct {
		status      int
		createOnErr bool
		wantPosts   int
		wantLists   int
	}{
		{status: 429, wantPosts: 2, wantLists: 0},
		{status: 500, createOnErr: true, wantPosts: 1, wantLists: 1},
		{status: 502, wantPosts: 2, wantLists: 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			f := newFakeAPI(t)
			ra := &reservationAPI{postStatus: tt.status, createOnErr: tt.createOnErr}
			ra.install(f)
			c := f.client(func(o *Options) { o.Retries = 3 })
			ctx := context.Background()
			if _, err := c.ReservationsWithTags(ctx, "warm-up"); err != nil {
				t.Fatal(err)
			}
			f.resetCounts()
			// Only the first POST fails.
			f.mu.Lock()
			post := f.handlers["POST /projects/"+projectID+"/ips"]
			f.mu.Unlock()
			f.handle("POST /projects/"+projectID+"/ips", func(w http.ResponseWriter, r *http.Request) {
				post(w, r)
				ra.mu.Lock()
				ra.postStatus = 0
				ra.mu.Unlock()
			})
			r, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: reserveTags(1)})
			if err != nil {
				t.Fatal(err)
			}
			posts, lists := f.count("POST /projects/"+projectID+"/ips"), f.count("GET /projects/"+projectID+"/ips")
			if posts != tt.wantPosts || lists != tt.wantLists {
				t.Errorf("%d POSTs and %d listings, want %d and %d", posts, lists, tt.wantPosts, tt.wantLists)
			}
			if len(ra.items) != 1 || ra.items[0]["id"] != r.GetId() {
				t.Errorf("the API holds %d reservations, want exactly the returned %s", len(ra.items), r.GetId())
			}
		})
	}
}

func reserveTags(i int) []string {
	return []string{"usage=cloud-provider-equinix-metal-auto", fmt.Sprintf("service=svc-%03d", i), "cluster=c1"}
}

func TestCreateMayBeRetried(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"transport error", &callError{StatusCode: 0, err: errors.New("connection reset")}, true},
		{"cancelled", &callError{StatusCode: 0, err: context.Canceled}, false},
		{"500", &callError{StatusCode: 500}, true},
		{"503 short Retry-After", &callError{StatusCode: 503, RetryAfter: time.Second}, true},
		{"429 long Retry-After", &callError{StatusCode: 429, RetryAfter: time.Hour}, false},
		{"501", &callError{StatusCode: 501}, false},
		{"422 no IPs left", &callError{StatusCode: 422}, false},
		{"not an API error", errors.New("no tags"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := createMayBeRetried(tt.err, 30*time.Second); got != tt.want {
				t.Errorf("createMayBeRetried = %v, want %v", got, tt.want)
			}
		})
	}
}
