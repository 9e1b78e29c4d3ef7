package faults

import (
	"strings"
	"testing"
	"time"
)

func TestProblems(t *testing.T) {
	converged := func() World {
		return World{
			Services:     map[string]Service{"default/a": {Ingress: []string{"1.2.3.4"}}},
			Reservations: []Reservation{{ID: "r1", Address: "1.2.3.4", Service: "default/a"}},
			Pools:        map[string][]string{"default.a": {"1.2.3.4/32"}},
			Advertised:   []string{"default.a"},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(w *World)
		want   []string // substrings of the problems, in order
	}{
		{"converged", func(*World) {}, nil},
		{"leaked reservation", func(w *World) {
			w.Reservations = append(w.Reservations, Reservation{ID: "r2", Address: "5.6.7.8", Service: "default/gone"})
		}, []string{"leaked reservation r2"}},
		{"duplicate", func(w *World) {
			w.Reservations = append(w.Reservations, Reservation{ID: "r2", Address: "5.6.7.8", Service: "default/a"})
		}, []string{"duplicate: 2 reservations for Service default/a"}},
		{"no ingress", func(w *World) {
			w.Services["default/a"] = Service{}
			w.Pools, w.Advertised = map[string][]string{}, nil
		}, []string{"Service default/a has no ingress"}},
		{"ingress not the reservation's", func(w *World) { w.Reservations[0].Address = "9.9.9.9" },
			[]string{"has ingress [1.2.3.4], its reservation 9.9.9.9"}},
		{"terminating", func(w *World) {
			w.Services["default/a"] = Service{Terminating: true, Ingress: []string{"1.2.3.4"}}
		}, []string{"Service default/a still terminating", "leaked reservation r1", "stale IPAddressPool default.a"}},
		{"stale pool and advertisement", func(w *World) {
			w.Pools["default.gone"] = []string{"5.6.7.8/32"}
			w.Advertised = append(w.Advertised, "default.gone", "default.missing")
		}, []string{"stale BGPAdvertisement entry: pool default.missing", "stale IPAddressPool default.gone"}},
		{"address in no pool", func(w *World) { w.Pools, w.Advertised = map[string][]string{}, nil },
			[]string{"address 1.2.3.4 of a live Service is in no IPAddressPool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := converged()
			tc.change(&w)
			got := w.Problems()
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %d: %q, want it to contain %q", i, got[i], want)
				}
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {0, 1}, {10, 1}} {
		if got := Percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty: want 0")
	}
}
