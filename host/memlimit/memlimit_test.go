package memlimit_test

import (
	"testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/memlimit"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"536870912\n", 512 << 20, true},
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false}, // cgroup v1: no limit
		{"", 0, false},
		{"0", 0, false},
	}
	for _, c := range cases {
		got, ok := memlimit.Parse(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
