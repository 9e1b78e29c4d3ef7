package emulator

import (
	"net/netip"
	"testing"
)

func mustAlloc(t *testing.T, p *pool, bits int) netip.Prefix {
	t.Helper()
	b, err := p.alloc(bits)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPoolAlignsAndNeverOverlaps(t *testing.T) {
	p := newPool(netip.MustParsePrefix("198.18.0.0/28"))
	a := mustAlloc(t, p, 32) // .0
	b := mustAlloc(t, p, 31) // .2/31 (aligned past .1)
	c := mustAlloc(t, p, 30) // .4/30
	d := mustAlloc(t, p, 29) // .8/29
	for want, got := range map[string]netip.Prefix{"198.18.0.0/32": a, "198.18.0.2/31": b, "198.18.0.4/30": c, "198.18.0.8/29": d} {
		if got.String() != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	// .1, skipped by alignment, was kept; then the pool is full.
	if got := mustAlloc(t, p, 32); got.String() != "198.18.0.1/32" {
		t.Errorf("gap: got %s", got)
	}
	if _, err := p.alloc(32); err == nil {
		t.Error("allocated from a full pool")
	}
	// Released blocks come back, oldest first, and larger ones are split.
	p.release(c)
	p.release(a)
	if got := mustAlloc(t, p, 30); got != c {
		t.Errorf("reused %s, want %s", got, c)
	}
	p.release(d)
	x, y := mustAlloc(t, p, 31), mustAlloc(t, p, 31)
	if x.String() != "198.18.0.8/31" || y.String() != "198.18.0.10/31" {
		t.Errorf("split %s %s", x, y)
	}
	if got := mustAlloc(t, p, 32); got != a {
		t.Errorf("reused %s, want %s", got, a)
	}
	if _, err := p.alloc(24); err == nil {
		t.Error("a /24 from a /28")
	}
}

func TestPoolReleaseAheadOfCursor(t *testing.T) {
	p := newPool(netip.MustParsePrefix("10.0.0.0/29"))
	claimed := netip.MustParsePrefix("10.0.0.4/31")
	if err := p.claim(claimed, nil); err != nil {
		t.Fatal(err)
	}
	// The cursor skips the claimed block.
	got := []netip.Prefix{mustAlloc(t, p, 31), mustAlloc(t, p, 31), mustAlloc(t, p, 31)}
	for _, g := range got {
		if g.Overlaps(claimed) {
			t.Fatalf("allocated %s over the claimed %s", g, claimed)
		}
	}
	// Released while ahead of the cursor: handed out once, not twice.
	q := newPool(netip.MustParsePrefix("10.0.0.0/30"))
	if err := q.claim(netip.MustParsePrefix("10.0.0.2/31"), nil); err != nil {
		t.Fatal(err)
	}
	q.release(netip.MustParsePrefix("10.0.0.2/31"))
	seen := map[netip.Prefix]bool{}
	for {
		b, err := q.alloc(31)
		if err != nil {
			break
		}
		if seen[b] {
			t.Fatalf("%s handed out twice", b)
		}
		seen[b] = true
	}
	if len(seen) != 2 {
		t.Errorf("%d blocks from a /30", len(seen))
	}
}

func TestPoolGapsAvoidClaims(t *testing.T) {
	p := newPool(netip.MustParsePrefix("10.0.0.0/27"))
	if err := p.claim(netip.MustParsePrefix("10.0.0.5/32"), nil); err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, p, 32)        // .0
	big := mustAlloc(t, p, 28) // .16/28; the gap .1-.15 is freed, except .5
	if big.String() != "10.0.0.16/28" {
		t.Fatalf("got %s", big)
	}
	seen := map[netip.Addr]bool{}
	for {
		b, err := p.alloc(32)
		if err != nil {
			break
		}
		if b.Addr().String() == "10.0.0.5" || seen[b.Addr()] {
			t.Fatalf("handed out %s", b)
		}
		seen[b.Addr()] = true
	}
	if len(seen) != 14 {
		t.Errorf("%d addresses recovered from the gap, want 14", len(seen))
	}
}

func TestPoolIPv6(t *testing.T) {
	p := newPool(netip.MustParsePrefix("2001:db8:100::/40"))
	a, b := mustAlloc(t, p, 56), mustAlloc(t, p, 56)
	if a.String() != "2001:db8:100::/56" || b.String() != "2001:db8:100:100::/56" {
		t.Errorf("got %s %s", a, b)
	}
	sub := newPool(a)
	x, y := mustAlloc(t, sub, 127), mustAlloc(t, sub, 127)
	if x.String() != "2001:db8:100::/127" || y.String() != "2001:db8:100::2/127" {
		t.Errorf("got %s %s", x, y)
	}
	// The last block of the whole space does not wrap around.
	top := newPool(netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126"))
	n := 0
	for {
		if _, err := top.alloc(127); err != nil {
			break
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d /127s from a /126 at the top of the space", n)
	}
}

func TestAddressHelpers(t *testing.T) {
	for p, want := range map[string]string{"10.0.0.0/25": "255.255.255.128", "1.2.3.4/32": "255.255.255.255", "2001:db8::/56": "ffff:ffff:ffff:ff00::"} {
		if got := netmask(netip.MustParsePrefix(p)); got != want {
			t.Errorf("netmask(%s) = %s, want %s", p, got, want)
		}
	}
	if got := nthAddr(netip.MustParsePrefix("10.0.0.2/31"), 1); got.String() != "10.0.0.3" {
		t.Errorf("nthAddr %s", got)
	}
}
