package provider

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A staged address is in the module's view for its Service only, until it
// expires.
func TestStagedAddresses(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := &stagedAddresses{now: func() time.Time { return now }}
	a := &v1.Service{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	b := &v1.Service{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	ips := []string{"198.18.0.5"}
	s.put(a.UID, ips)
	ips[0] = "changed by the caller"
	for _, tc := range []struct {
		name  string
		after time.Duration
		svc   *v1.Service
		want  []string
	}{
		{name: "staged", svc: a, want: []string{"198.18.0.5"}},
		{name: "another Service", svc: b},
		{name: "within the TTL", after: stagedTTL, svc: a, want: []string{"198.18.0.5"}},
		{name: "expired", after: time.Nanosecond, svc: a},
	} {
		now = now.Add(tc.after)
		if got := s.get(tc.svc); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	s.put("c", []string{"198.18.0.6"}) // sweeps the expired entries
	if _, ok := s.m[types.UID("a")]; ok || len(s.m) != 1 {
		t.Errorf("entries after a put: %v, want only c's", s.m)
	}
}

// stage waits for the module loop at most stageWait, and not at all
// without one.
func TestStage(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{UID: "a", Namespace: "default", Name: "web"}}
	lb := &loadBalancer{}
	lb.stage(context.Background(), svc, []string{"198.18.0.5"}) // no loop: returns
	if got := lb.staged.get(svc); !slices.Equal(got, []string{"198.18.0.5"}) {
		t.Fatalf("staged %v", got)
	}
	var deadline time.Duration
	lb.setAwaitSync(func(ctx context.Context) bool {
		d, ok := ctx.Deadline()
		if !ok {
			t.Error("no deadline on the wait")
		}
		deadline = time.Until(d)
		return true
	})
	lb.stage(context.Background(), svc, []string{"198.18.0.7"})
	if deadline <= 0 || deadline > stageWait {
		t.Errorf("waited with %v left, want at most %v", deadline, stageWait)
	}
	if got := lb.staged.get(svc); !slices.Equal(got, []string{"198.18.0.7"}) {
		t.Fatalf("staged %v after a second stage", got)
	}
}
