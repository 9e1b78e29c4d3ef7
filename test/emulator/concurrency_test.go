package emulator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metalv1 "github.com/equinix/equinix-sdk-go/services/metalv1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator/specvalidate"
)

// TestConcurrentReservations: N goroutines reserving at once get N
// distinct addresses (run with -race).
func TestConcurrentReservations(t *testing.T) {
	e, client := start(t, testSeed(), emulator.Options{})
	const n = 64
	c := client(tokAll)
	addrs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			res, _, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(reserveReq("da")).Execute()
			if err != nil {
				errs[i] = err
				return
			}
			addrs[i] = res.IPReservation.GetAddress()
		}()
	}
	close(gate)
	wg.Wait()
	seen := map[string]int{}
	for i, a := range addrs {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		if j, dup := seen[a]; dup {
			t.Fatalf("goroutines %d and %d both got %s", j, i, a)
		}
		seen[a] = i
	}
	if got := len(e.ElasticReservations(projA)); got != n+1 {
		t.Errorf("%d elastic reservations, want %d", got, n+1)
	}
}

// TestConcurrentChurn mixes reservations, deletions, listings, assignments
// and device additions from many goroutines, then checks that no two held
// blocks overlap.
func TestConcurrentChurn(t *testing.T) {
	e, _ := start(t, testSeed(), emulator.Options{})
	cfg := e.Configuration(tokAll)
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	specvalidate.Instrument(t, cfg, specvalidate.Options{})
	c := metalv1.NewAPIClient(cfg)
	const workers, rounds = 12, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []string
			for i := range rounds {
				switch rng.IntN(5) {
				case 0, 1:
					q := []int32{1, 1, 2, 4, 8}[rng.IntN(5)]
					in := metalv1.IPReservationRequestInput{Type: "public_ipv4", Quantity: q, Metro: metalv1.PtrString([]string{"da", "sv"}[rng.IntN(2)])}
					res, _, err := c.IPAddressesApi.RequestIPReservation(ctx, projA).RequestIPReservationRequest(metalv1.IPReservationRequestInputAsRequestIPReservationRequest(&in)).Execute()
					if err != nil {
						t.Errorf("reserve: %v", err)
						return
					}
					mine = append(mine, res.IPReservation.GetId())
				case 2:
					if len(mine) > 0 {
						k := rng.IntN(len(mine))
						if _, err := c.IPAddressesApi.DeleteIPAddress(ctx, mine[k]).Execute(); err != nil {
							t.Errorf("delete: %v", err)
							return
						}
						mine = append(mine[:k], mine[k+1:]...)
					}
				case 3:
					if _, _, err := c.IPAddressesApi.FindIPReservations(ctx, projA).Include([]string{"assignments"}).PerPage(50).Execute(); err != nil {
						t.Errorf("list: %v", err)
						return
					}
				case 4:
					if _, err := e.AddDevice(emulator.DeviceSeed{Project: projA, Hostname: fmt.Sprintf("w%d-%d", w, i), Metro: "da"}); err != nil {
						t.Errorf("add device: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	rs := e.Reservations(projA)
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if rs[i].Prefix.Overlaps(rs[j].Prefix) {
				t.Fatalf("%s (%s) overlaps %s (%s)", rs[i].Prefix, rs[i].ID, rs[j].Prefix, rs[j].ID)
			}
		}
	}
	// Device addresses are distinct too.
	seen := map[string]string{}
	for _, d := range e.Devices(projA) {
		for _, a := range d.Addresses {
			if other, dup := seen[a.Prefix.String()]; dup {
				t.Fatalf("%s and %s share %s", d.Hostname, other, a.Prefix)
			}
			seen[a.Prefix.String()] = d.Hostname
		}
	}
	t.Logf("%d reservations, %d device addresses after the churn", len(rs), len(seen))
}

// BenchmarkReserveListDelete is the CCM's Service churn: reserve an
// Elastic IP, read it back, list the project's public IPv4 reservations (a
// page of 50, of some 500), delete it; four API calls per operation,
// through the SDK over loopback, from parallel clients. It reports the
// emulator's throughput in requests per second (client and server share
// the machine).
func BenchmarkReserveListDelete(b *testing.B) {
	seed := emulator.DefaultSeed()
	e, err := emulator.New(seed, emulator.Options{RandSeed: 1})
	if err != nil {
		b.Fatal(err)
	}
	e.Start()
	defer e.Close()
	if _, err := e.AddDevices(50, emulator.DeviceSeed{Metro: "da"}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.AddReservations(500, emulator.ReservationSeed{Metro: "da"}, func(i int) []string {
		return []string{"usage=cloud-provider-equinix-metal-auto", fmt.Sprintf("service=%d", i)}
	}); err != nil {
		b.Fatal(err)
	}
	cfg := e.Configuration(emulator.DefaultToken)
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	c := metalv1.NewAPIClient(cfg)
	types := []metalv1.FindIPReservationsTypesParameterInner{"public_ipv4"}
	e.ResetCounts()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, _, err := c.IPAddressesApi.RequestIPReservation(ctx, emulator.DefaultProjectID).RequestIPReservationRequest(reserveReq("da")).Execute()
			if err != nil {
				b.Error(err)
				return
			}
			id := res.IPReservation.GetId()
			if _, _, err := c.IPAddressesApi.FindIPAddressById(ctx, id).Execute(); err != nil {
				b.Error(err)
				return
			}
			if _, _, err := c.IPAddressesApi.FindIPReservations(ctx, emulator.DefaultProjectID).Types(types).PerPage(50).Execute(); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.IPAddressesApi.DeleteIPAddress(ctx, id).Execute(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.ReportMetric(float64(e.TotalRequests())/elapsed.Seconds(), "req/s")
}

// BenchmarkGetDevice is the cheapest hot call (InstanceExists, metadata).
func BenchmarkGetDevice(b *testing.B) {
	e, err := emulator.New(emulator.DefaultSeed(), emulator.Options{RandSeed: 1})
	if err != nil {
		b.Fatal(err)
	}
	e.Start()
	defer e.Close()
	ds, err := e.AddDevices(2000, emulator.DeviceSeed{Metro: "da"})
	if err != nil {
		b.Fatal(err)
	}
	cfg := e.Configuration(emulator.DefaultToken)
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	c := metalv1.NewAPIClient(cfg)
	e.ResetCounts()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(ds))
		for pb.Next() {
			i = (i + 1) % len(ds)
			if _, _, err := c.DevicesApi.FindDeviceById(ctx, ds[i].ID).Execute(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(e.TotalRequests())/time.Since(start).Seconds(), "req/s")
}

// BenchmarkServerOnly is the same mix as BenchmarkReserveListDelete with a
// bare HTTP client that discards the bodies, so the figure is the
// emulator's own capacity rather than the SDK's decoding speed.
func BenchmarkServerOnly(b *testing.B) {
	e, err := emulator.New(emulator.DefaultSeed(), emulator.Options{RandSeed: 1})
	if err != nil {
		b.Fatal(err)
	}
	base := e.Start()
	defer e.Close()
	if _, err := e.AddDevices(50, emulator.DeviceSeed{Metro: "da"}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.AddReservations(500, emulator.ReservationSeed{Metro: "da"}, nil); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	do := func(method, url, body string) ([]byte, error) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("X-Auth-Token", emulator.DefaultToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, out)
		}
		return out, err
	}
	proj := base + "/projects/" + emulator.DefaultProjectID
	e.ResetCounts()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := do("POST", proj+"/ips", `{"type":"public_ipv4","quantity":1,"metro":"da","tags":["a","b","c"],"fail_on_approval_required":true}`)
			if err != nil {
				b.Error(err)
				return
			}
			var r struct{ ID string }
			_ = json.Unmarshal(out, &r)
			for _, step := range [][2]string{{"GET", base + "/ips/" + r.ID}, {"GET", proj + "/ips?types=public_ipv4&per_page=50"}, {"DELETE", base + "/ips/" + r.ID}} {
				if _, err := do(step[0], step[1], ""); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
	b.ReportMetric(float64(e.TotalRequests())/time.Since(start).Seconds(), "req/s")
}
