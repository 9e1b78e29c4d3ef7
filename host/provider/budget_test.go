package provider

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// apiCalls is what the emulator served since the last reset, by route.
func apiCalls(e *emulator.Emulator) (int64, string) {
	counts := e.Counts()
	var total int64
	var parts []string
	for r, n := range counts {
		if n == 0 {
			continue
		}
		total += n
		parts = append(parts, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(parts)
	return total, fmt.Sprint(parts)
}

// TestAPICallBudget counts Equinix Metal calls (counts, not times, so they
// are exact): a resync of 100 Services on 10 nodes makes none, and a node
// joining a cluster with 100 Services makes at most 3.
func TestAPICallBudget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("100 Services; run without -short")
	}
	h := newHarness(t, harnessOptions{seed: testSeed(11), settings: map[string]any{"metro": "da", "bgpMaxPrefixes": 200}})
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		h.addNode(fmt.Sprintf("node-%d", i), nil)
	}
	const services = 100
	for i := 0; i < services; i++ {
		h.addService(fmt.Sprintf("svc-%03d", i), nil, "")
	}
	h.eventually("100 Services with addresses and 10 annotated nodes", func() (bool, string) {
		list, err := h.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		with := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				with++
			}
		}
		nodes, _ := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		annotated := 0
		for _, n := range nodes.Items {
			if n.Annotations["metal.equinix.com/bgp-peers-0-peer-ip"] != "" {
				annotated++
			}
		}
		return with == services && annotated == 10, fmt.Sprintf("%d/%d services, %d/10 nodes", with, services, annotated)
	})
	time.Sleep(2 * time.Second) // let the module loop and status writes settle

	// Steady state: the service controller re-ensures every Service (as on
	// a resync that finds changes, or a leader change) on the same nodes.
	h.emu.ResetCounts()
	list, _ := h.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	lb, _ := h.cloud.LoadBalancer()
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue // default/kubernetes
		}
		if _, err := lb.EnsureLoadBalancer(ctx, "test", s, nil); err != nil {
			t.Fatal(err)
		}
		if err := lb.UpdateLoadBalancer(ctx, "test", s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, detail := apiCalls(h.emu); n != 0 {
		t.Errorf("resync of %d Services x 10 nodes made %d Equinix calls: %s", services, n, detail)
	} else {
		t.Logf("resync of %d Services x 10 nodes: 0 Equinix calls", services)
	}

	// One node joins.
	h.emu.ResetCounts()
	h.addNode("node-10", nil)
	h.eventually("the new node is initialised and annotated", func() (bool, string) {
		n, err := h.kube.CoreV1().Nodes().Get(ctx, "node-10", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Spec.ProviderID != "" && n.Annotations["metal.equinix.com/bgp-peers-1-peer-ip"] != "", "not yet"
	})
	time.Sleep(2 * time.Second) // anything the join triggers has run
	n, detail := apiCalls(h.emu)
	t.Logf("one node joining with %d Services: %d Equinix calls: %s", services, n, detail)
	if n > 3 {
		t.Errorf("a node joining made %d Equinix calls, want at most 3: %s", n, detail)
	}
}

// BenchmarkServiceBurst creates 100 Services at once against an API that
// answers every call at once, and after 50 ms, and reports the time from creation to an
// address in the status (p50, p99, max). One iteration is one burst.
//
//	go test ./host/provider -run '^$' -bench ServiceBurst -benchtime 1x
func BenchmarkServiceBurst(b *testing.B) {
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("api-latency=%s", latency), func(b *testing.B) { serviceBurst(b, latency) })
	}
}

func serviceBurst(b *testing.B, latency time.Duration) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := newHarness(b, harnessOptions{seed: testSeed(3), settings: map[string]any{"metro": "da", "bgpMaxPrefixes": 200}})
		for _, r := range emulator.Routes() {
			h.emu.SetFault(r, emulator.Fault{Latency: emulator.Duration(latency)})
		}
		ctx := context.Background()
		const services = 100
		created := make([]time.Time, services)
		h.emu.ResetCounts()
		b.StartTimer()
		var wg sync.WaitGroup
		for j := 0; j < services; j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				created[j] = time.Now()
				h.addService(fmt.Sprintf("burst-%03d", j), nil, "")
			}(j)
		}
		wg.Wait()
		got := map[string]time.Duration{}
		deadline := time.Now().Add(2 * time.Minute)
		for len(got) < services && time.Now().Before(deadline) {
			list, err := h.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for _, s := range list.Items {
				if _, done := got[s.Name]; done || len(s.Status.LoadBalancer.Ingress) == 0 {
					continue
				}
				var j int
				if _, err := fmt.Sscanf(s.Name, "burst-%03d", &j); err != nil {
					b.Fatalf("Service %s: not one of the burst: %v", s.Name, err)
				}
				got[s.Name] = now.Sub(created[j])
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StopTimer()
		if len(got) < services {
			b.Fatalf("only %d of %d Services got an address", len(got), services)
		}
		calls, detail := apiCalls(h.emu)
		b.ReportMetric(float64(calls), "api-calls")
		b.Logf("Equinix calls for %d new Services: %d: %s", services, calls, detail)
		var lat []time.Duration
		for _, d := range got {
			lat = append(lat, d)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
		h.Stop()
	}
}
