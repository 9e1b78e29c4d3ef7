package policy

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPlacement is one EIP placement decision with the built-in
// policy: a Service with the metro annotation, in a cluster of 0 or 50
// nodes (the input carries them for custom policies; the default does not
// read them). Goal: ≤ 50 µs.
func BenchmarkPlacement(b *testing.B) {
	for _, n := range []int{0, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e := mustLoad(b, "", Options{})
			in := PlacementInput{
				Service: Service{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
					Annotations: map[string]string{"metal.equinix.com/eip-metro": "da", "other": "x"}},
				Config: defaultConfig,
				Nodes:  benchNodes(n),
			}
			ctx := context.Background()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := e.Placement(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSelectNodes5000 selects among 5,000 nodes in one evaluation
// with the built-in policy and a three-requirement selector. Goal: ≤ 20 ms.
func BenchmarkSelectNodes5000(b *testing.B) {
	for _, selector := range []string{"", "bgp=enabled", "bgp=enabled,!node-role.kubernetes.io/control-plane,topology.kubernetes.io/region in (da,ny)"} {
		b.Run(fmt.Sprintf("selector=%q", selector), func(b *testing.B) {
			e := mustLoad(b, "", Options{})
			reqs, err := ParseSelector(selector)
			if err != nil {
				b.Fatal(err)
			}
			in := SelectionInput{Nodes: benchNodes(5000), BGPNodeSelector: reqs}
			ctx := context.Background()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				got, err := e.SelectNodes(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				if got.Len() == 0 {
					b.Fatal("no node selected")
				}
			}
		})
	}
}

// benchNodes are n nodes with the labels a real node has (about ten).
func benchNodes(n int) []Node {
	metros := []string{"da", "ny", "sv", "am"}
	nodes := make([]Node, n)
	for i := range nodes {
		metro := metros[i%len(metros)]
		labels := map[string]string{
			"kubernetes.io/hostname":           fmt.Sprintf("node-%d", i),
			"kubernetes.io/os":                 "linux",
			"kubernetes.io/arch":               "amd64",
			"beta.kubernetes.io/os":            "linux",
			"beta.kubernetes.io/arch":          "amd64",
			"node.kubernetes.io/instance-type": "m3.small.x86",
			"topology.kubernetes.io/region":    metro,
			"bgp":                              []string{"enabled", "disabled"}[i%2],
		}
		if i%50 == 0 {
			labels["node-role.kubernetes.io/control-plane"] = ""
		}
		nodes[i] = Node{
			Name:       fmt.Sprintf("node-%d", i),
			Labels:     labels,
			ProviderID: fmt.Sprintf("equinixmetal://%08d-0000-0000-0000-000000000000", i),
			Metro:      metro,
		}
	}
	return nodes
}

// reportCPU adds the process CPU time per operation to a benchmark's
// output. The machine these run on is shared, and wall time per op (ns/op)
// there includes the time other processes held the CPU; CPU time does not.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
