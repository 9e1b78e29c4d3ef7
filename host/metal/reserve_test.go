package metal

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
)

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
