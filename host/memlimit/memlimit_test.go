package memlimit

import (
	"testing"
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
		got, ok := parse(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSoft(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name            string
		limit, reserved int64
		want            int64
		note            string
		ok              bool
	}{
		{"no module", 512 * mib, 0, 483183820, "90% of the container's 512 MiB", true},
		{"the module's limit is taken off first", 512 * mib, 96 * mib, 392586854, "90% of the container's 512 MiB less the load-balancer module's 96 MiB", true},
		{"too little left: the whole limit, not ok", 128 * mib, 96 * mib, 120795955, "90% of the container's 128 MiB", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, note, ok := Soft(c.limit, c.reserved)
			if got != c.want || note != c.note || ok != c.ok {
				t.Errorf("Soft(%d MiB, %d MiB) = %d, %q, %v; want %d, %q, %v", c.limit/mib, c.reserved/mib, got, note, ok, c.want, c.note, c.ok)
			}
		})
	}
}
