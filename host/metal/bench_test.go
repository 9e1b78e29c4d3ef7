package metal

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/location"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// The performance goals are measured here against the emulator, and
// reported as custom metrics (api-calls/op, p99-ms); nothing is asserted
// on time. Run with:
//
//	go test -run '^$' -bench . -benchtime 3x ./host/metal/

// BenchmarkSteadyStateResync: one sync of 100 Services over 10 nodes, as
// far as Equinix is concerned (reservation by tags, each node's device and
// BGP session), with warm caches.
func BenchmarkSteadyStateResync(b *testing.B) {
	e, c := startEmulator(b)
	ctx := context.Background()
	nodes, err := e.AddDevices(10, emulator.DeviceSeed{Hostname: "worker-%d", Metro: "da"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.AddReservations(100, emulator.ReservationSeed{Metro: "da"}, svcTags); err != nil {
		b.Fatal(err)
	}
	sync := func() {
		for i := range 100 {
			if rs, err := c.ReservationsWithTags(ctx, svcTags(i)...); err != nil || len(rs) != 1 {
				b.Fatalf("ReservationsWithTags(%d) = %v, %v", i, rs, err)
			}
			for _, n := range nodes {
				if _, err := c.Device(ctx, n.ID); err != nil {
					b.Fatal(err)
				}
				if err := c.EnsureDeviceBGPSession(ctx, n.ID); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	sync()
	e.ResetCounts()
	b.ResetTimer()
	for range b.N {
		sync()
	}
	b.ReportMetric(float64(e.TotalRequests())/float64(b.N), "api-calls/op")
}

// BenchmarkNodeJoin: a node joins a cluster of 100 Services: its device by
// hostname, its BGP session and neighbours, then the 100 Services' syncs.
func BenchmarkNodeJoin(b *testing.B) {
	e, c := startEmulator(b)
	ctx := context.Background()
	if _, err := e.AddReservations(100, emulator.ReservationSeed{Metro: "da"}, svcTags); err != nil {
		b.Fatal(err)
	}
	if _, err := c.ReservationsWithTags(ctx, svcTags(0)...); err != nil {
		b.Fatal(err)
	}
	if err := c.RefreshDevices(ctx); err != nil {
		b.Fatal(err)
	}
	var calls int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		host := fmt.Sprintf("joiner-%d", i)
		if _, err := e.AddDevice(emulator.DeviceSeed{Hostname: host, Metro: "da"}); err != nil {
			b.Fatal(err)
		}
		e.ResetCounts()
		b.StartTimer()
		d, err := c.DeviceByHostname(ctx, host)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.EnsureDeviceBGPSession(ctx, d.GetId()); err != nil {
			b.Fatal(err)
		}
		if _, err := c.DeviceBGPNeighbors(ctx, d.GetId()); err != nil {
			b.Fatal(err)
		}
		for s := range 100 {
			if _, err := c.ReservationsWithTags(ctx, svcTags(s)...); err != nil {
				b.Fatal(err)
			}
			if err := c.EnsureDeviceBGPSession(ctx, d.GetId()); err != nil {
				b.Fatal(err)
			}
		}
		calls += e.TotalRequests()
	}
	b.ReportMetric(float64(calls)/float64(b.N), "api-calls/op")
}

// BenchmarkCreate100Services: 100 new Services at once, each requesting its
// EIP (lookup by tags, then POST), with 50 ms of API latency on every
// route. Latency is from the moment all 100 start to each one's answer.
func BenchmarkCreate100Services(b *testing.B) {
	for _, tc := range []struct {
		name       string
		workers    int
		qps        float64
		burst      int
		largeProj  bool
		reportName string
	}{
		{"workers=100/qps=1000", 100, 1000, 1000, false, ""},
		{"workers=20/qps=1000", 20, 1000, 1000, false, ""},
		{"workers=100/qps=50,burst=100", 100, 50, 100, false, ""},
		{"workers=100/qps=10,burst=20(default)", 100, 10, 20, false, ""},
		{"workers=100/qps=1000/project=2000dev+1500eip", 100, 1000, 1000, true, ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e, c := startEmulator(b, func(o *Options) { o.QPS, o.Burst = tc.qps, tc.burst })
			ctx := context.Background()
			if tc.largeProj {
				seedLargeProject(b, e)
			}
			if _, err := c.ReservationsWithTags(ctx, "warm-up"); err != nil {
				b.Fatal(err)
			}
			e.SetFault(emulator.AllRoutes, emulator.Fault{Latency: emulator.Duration(50 * time.Millisecond)})
			var all []time.Duration
			var calls int64
			b.ResetTimer()
			for it := range b.N {
				e.ResetCounts()
				lat := make([]time.Duration, 100)
				jobs := make(chan int)
				var wg sync.WaitGroup
				start := time.Now()
				for range tc.workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range jobs {
							tags := []string{"usage=cloud-provider-equinix-metal-auto", fmt.Sprintf("service=bench-%d-%d", it, i), "cluster=c1"}
							if _, err := c.RequestReservation(ctx, ReservationRequest{Location: location.Location{Metro: "da"}, Tags: tags}); err != nil {
								b.Error(err)
							}
							lat[i] = time.Since(start)
						}
					}()
				}
				for i := range 100 {
					jobs <- i
				}
				close(jobs)
				wg.Wait()
				all = append(all, lat...)
				calls += e.TotalRequests()
			}
			b.StopTimer()
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Milliseconds()), "p99-ms")
			b.ReportMetric(float64(calls)/float64(b.N), "api-calls/op")
		})
	}
}

// BenchmarkCachedLookups: the cost of a cached lookup in a project of
// 2,000 devices and 1,500 Service EIPs (plus 2,000 management blocks).
func BenchmarkCachedLookups(b *testing.B) {
	e, c := startEmulator(b)
	seedLargeProject(b, e)
	ctx := context.Background()
	devs := e.Devices(emulator.DefaultProjectID)
	if _, err := c.Device(ctx, devs[0].ID); err != nil {
		b.Fatal(err)
	}
	if _, err := c.ReservationsWithTags(ctx, svcTags(0)...); err != nil {
		b.Fatal(err)
	}
	e.ResetCounts()
	b.Run("Device", func(b *testing.B) {
		for i := range b.N {
			if _, err := c.Device(ctx, devs[i%len(devs)].ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DeviceByHostname", func(b *testing.B) {
		for i := range b.N {
			if _, err := c.DeviceByHostname(ctx, devs[i%len(devs)].Hostname); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReservationsWithTags", func(b *testing.B) {
		for i := range b.N {
			if rs, err := c.ReservationsWithTags(ctx, svcTags(i%1500)...); err != nil || len(rs) != 1 {
				b.Fatal(err)
			}
		}
	})
	if n := e.TotalRequests(); n != 0 {
		b.Errorf("cached lookups made %d calls", n)
	}
}

// BenchmarkRefresh: one full re-read of each cache in the large project.
func BenchmarkRefresh(b *testing.B) {
	e, c := startEmulator(b)
	seedLargeProject(b, e)
	ctx := context.Background()
	b.Run("devices", func(b *testing.B) {
		e.ResetCounts()
		for range b.N {
			if err := c.RefreshDevices(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(e.TotalRequests())/float64(b.N), "api-calls/op")
	})
	b.Run("reservations", func(b *testing.B) {
		e.ResetCounts()
		for range b.N {
			if err := c.RefreshReservations(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(e.TotalRequests())/float64(b.N), "api-calls/op")
	})
}

// BenchmarkReservationCacheHeap: the heap the reservation cache keeps for
// 10,000 Service Elastic IPs (each assigned to a device) after a listing,
// per reservation: the live heap after a collection, with the cache filled
// by a new client, less before.
func BenchmarkReservationCacheHeap(b *testing.B) {
	e, _ := startEmulator(b)
	res, err := e.AddReservations(10000, emulator.ReservationSeed{Metro: "da"}, svcTags)
	if err != nil {
		b.Fatal(err)
	}
	dev, err := e.AddDevice(emulator.DeviceSeed{Hostname: "node-0", Metro: "da"})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if _, err := e.AssignIP(dev.ID, r.Prefix.Addr().String()); err != nil {
			b.Fatal(err)
		}
	}
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perReservation float64
	for range b.N {
		c, err := New(Options{BaseURL: e.URL(), APIKey: config.Secret(fakeKey), ProjectID: emulator.DefaultProjectID,
			Timeout: time.Minute, Retries: 3, QPS: 1000, Burst: 1000, RetryWaitMin: 5 * time.Millisecond, RetryWaitMax: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		before := live()
		if err := c.RefreshReservations(context.Background()); err != nil {
			b.Fatal(err)
		}
		perReservation = float64(int64(live())-int64(before)) / float64(len(res))
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perReservation, "heap-B/reservation")
}
