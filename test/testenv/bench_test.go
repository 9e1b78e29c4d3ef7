package testenv

import (
	"testing"
	"time"
)

// BenchmarkStart measures start-to-ready (etcd + kube-apiserver + MetalLB
// CRDs Established and settled + cluster basics), the cost every
// integration test package pays once; ns/op covers Start only, and
// stop-ms/op the teardown. Goal: under 5 s with warm caches.
//
//	go test -run '^$' -bench BenchmarkStart -benchtime 5x ./test/testenv
func BenchmarkStart(b *testing.B) {
	var stop time.Duration
	for b.Loop() {
		env, err := Start(b.Context(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		began := time.Now()
		env.Stop()
		stop += time.Since(began)
		b.StartTimer()
	}
	b.ReportMetric(float64(stop.Milliseconds())/float64(b.N), "stop-ms/op")
}
