//go:build linux

package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The verdict names the shortfall, and what earlier runs left, with the
// command that frees it.
func TestDiskVerdict(t *testing.T) {
	const gi = 1 << 30
	left := []leftover{{dir: "/tmp/cluster-1", bytes: 2 * gi}, {dir: "/tmp/cluster-2", bytes: 3 * gi}}
	for _, tc := range []struct {
		name       string
		free, size uint64
		left       []leftover
		want       []string // substrings; none means no error
	}{
		{name: "room", free: 20 * gi, size: 100 * gi},
		{name: "room on a big disk", free: 6 * gi, size: 250 * gi},
		{name: "below the eviction line", free: 4 * gi, size: 250 * gi, want: []string{"4.0 GiB free", "needs 5.5 GiB", "free some space"}},
		{name: "full, nothing left by us", free: 1 * gi, size: 100 * gi, want: []string{"/tmp has 1.0 GiB free", "needs 4.0 GiB", "free some space"}},
		{name: "full of earlier runs", free: 1 * gi, size: 100 * gi, left: left,
			want: []string{"2 work directories of earlier runs (/tmp/cluster-1 /tmp/cluster-2) hold 5.0 GiB", "make cluster-clean", "rm -rf /tmp/cluster-*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := diskVerdict("/tmp", tc.free, tc.size, tc.left)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused with room: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("started with too little room")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A failed run keeps its logs and loses its images and node state.
func TestPruneKept(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{ // path: kept
		"image-1.tar":                           false,
		"node-1/containerd/root/blob":           false,
		"node-2/kubelet/pods/x/volume":          false,
		"node-1/containerd.log":                 true,
		"node-1/kubelet.log":                    true,
		"node-1/pod-logs/ns_pod/c/0.log":        true,
		"pod-logs/metallb-system_speaker_x.log": true,
		"controlplane/kube-apiserver.log":       true,
	}
	for f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	freed, err := pruneKept(dir)
	if err != nil {
		t.Fatal(err)
	}
	if freed != 30 {
		t.Errorf("freed %d bytes, want 30", freed)
	}
	for f, kept := range files {
		_, err := os.Stat(filepath.Join(dir, f))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept=%v, want %v", f, got, kept)
		}
	}
}
