package lbmodule

import "testing"

// TestVersionUnchanged is the rule that skips an apply: the object still
// as this process applied it, whether the copy it is compared with is a
// fresh list or a watch a moment behind the write.
func TestVersionUnchanged(t *testing.T) {
	applied := version{rv: "120", uid: "u1", generation: 3}
	for _, tc := range []struct {
		name string
		live version
		want bool
	}{
		{"as written", version{"120", "u1", 3}, true},
		{"its controller wrote the status", version{"131", "u1", 3}, true},
		{"a watch that has not seen the write yet", version{"97", "u1", 2}, true},
		{"another writer changed it", version{"140", "u1", 4}, false},
		{"deleted and made again", version{"150", "u2", 1}, false},
		{"made again at the same generation", version{"150", "u2", 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := applied.unchanged(tc.live); got != tc.want {
				t.Errorf("unchanged(%+v) = %v, want %v", tc.live, got, tc.want)
			}
		})
	}
	// Kinds without a generation (ConfigMaps, Secrets) compare by
	// resourceVersion alone: a watch behind the write means an apply again.
	plain := version{rv: "120", uid: "u1"}
	if plain.unchanged(version{"97", "u1", 0}) {
		t.Error("an older resourceVersion of a kind without a generation taken as unchanged")
	}
	if !plain.unchanged(version{"120", "u1", 0}) {
		t.Error("the same resourceVersion taken as changed")
	}
}
