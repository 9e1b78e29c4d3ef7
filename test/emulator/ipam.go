package emulator

import (
	"fmt"
	"math/bits"
	"net/netip"
)

// u128 is an address as a 128-bit number, so IPv4 and IPv6 share one
// allocator. IPv4 addresses use the low 32 bits.
type u128 struct{ hi, lo uint64 }

func addrToU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
	}
	b := a.As16()
	var x u128
	for i := 0; i < 8; i++ {
		x.hi = x.hi<<8 | uint64(b[i])
		x.lo = x.lo<<8 | uint64(b[8+i])
	}
	return x
}

func u128ToAddr(x u128, is4 bool) netip.Addr {
	if is4 {
		return netip.AddrFrom4([4]byte{byte(x.lo >> 24), byte(x.lo >> 16), byte(x.lo >> 8), byte(x.lo)})
	}
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[7-i] = byte(x.hi >> (8 * i))
		b[15-i] = byte(x.lo >> (8 * i))
	}
	return netip.AddrFrom16(b)
}

func (x u128) add(y u128) (u128, bool) {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c2 := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}, c2 != 0
}

func sub1(x u128) u128 {
	lo, b := bits.Sub64(x.lo, 1, 0)
	hi, _ := bits.Sub64(x.hi, 0, b)
	return u128{hi, lo}
}

func (x u128) less(y u128) bool { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo) }

// blockSize is 2^(total-bits) addresses, as a u128.
func blockSize(total, prefixBits int) u128 {
	n := total - prefixBits
	if n >= 64 {
		return u128{hi: 1 << (n - 64)}
	}
	return u128{lo: 1 << n}
}

// alignUp rounds x up to a multiple of size (a power of two).
func alignUp(x, size u128) (u128, bool) {
	mask := sub1(size)
	if x.hi&mask.hi == 0 && x.lo&mask.lo == 0 {
		return x, false
	}
	y, over := x.add(mask)
	return u128{y.hi &^ mask.hi, y.lo &^ mask.lo}, over
}

// pool hands out aligned blocks of one prefix. A block is never handed
// out while it is held: fresh space is used first (a cursor moving up), and
// released blocks are reused, oldest first, only when fresh space runs out.
// Blocks claimed explicitly (seeded addresses) are skipped by the cursor.
type pool struct {
	prefix  netip.Prefix
	next    u128
	end     u128 // last address of the prefix
	done    bool // the cursor has passed the end
	free    map[int][]netip.Prefix
	claimed []netip.Prefix // explicitly claimed blocks the cursor must skip
}

func newPool(p netip.Prefix) *pool {
	p = p.Masked()
	total := p.Addr().BitLen()
	start := addrToU128(p.Addr())
	size := blockSize(total, p.Bits())
	last, _ := start.add(sub1(size))
	return &pool{prefix: p, next: start, end: last, free: map[int][]netip.Prefix{}}
}

func (p *pool) overlapsClaimed(b netip.Prefix) (netip.Prefix, bool) {
	for _, c := range p.claimed {
		if c.Overlaps(b) {
			return c, true
		}
	}
	return netip.Prefix{}, false
}

// alloc returns a free block of the given prefix length.
func (p *pool) alloc(prefixBits int) (netip.Prefix, error) {
	total := p.prefix.Addr().BitLen()
	if prefixBits < p.prefix.Bits() || prefixBits > total {
		return netip.Prefix{}, fmt.Errorf("a /%d does not fit in %s", prefixBits, p.prefix)
	}
	size := blockSize(total, prefixBits)
	sizeMinus1 := sub1(size)
	for !p.done {
		start, over := alignUp(p.next, size)
		if over {
			p.done = true
			break
		}
		last, over := start.add(sizeMinus1)
		if over || p.end.less(last) {
			p.done = true
			break
		}
		blk := netip.PrefixFrom(u128ToAddr(start, total == 32), prefixBits)
		if c, ok := p.overlapsClaimed(blk); ok {
			// Skip past the claimed block and try again.
			cEnd, over := addrToU128(c.Addr()).add(blockSize(total, c.Bits()))
			if over {
				p.done = true
				break
			}
			p.next = cEnd
			continue
		}
		p.freeRange(p.next, start) // the alignment gap, if any
		if next, over := last.add(u128{lo: 1}); over {
			p.done = true
		} else {
			p.next = next
		}
		return blk, nil
	}
	if l := p.free[prefixBits]; len(l) > 0 {
		blk := l[0]
		p.free[prefixBits] = l[1:]
		return blk, nil
	}
	// Split the smallest larger free block.
	for bigger := prefixBits - 1; bigger >= p.prefix.Bits(); bigger-- {
		l := p.free[bigger]
		if len(l) == 0 {
			continue
		}
		blk := l[0]
		p.free[bigger] = l[1:]
		// Halve repeatedly, returning the upper halves to the free lists.
		for b := bigger + 1; b <= prefixBits; b++ {
			lower := netip.PrefixFrom(blk.Addr(), b)
			upperStart, _ := addrToU128(blk.Addr()).add(blockSize(total, b))
			upper := netip.PrefixFrom(u128ToAddr(upperStart, total == 32), b)
			p.free[b] = append(p.free[b], upper)
			blk = lower
		}
		return blk, nil
	}
	return netip.Prefix{}, fmt.Errorf("no free /%d left in %s", prefixBits, p.prefix)
}

// freeRange puts the addresses [lo, hi) on the free lists as maximal
// aligned blocks, leaving out claimed ones.
func (p *pool) freeRange(lo, hi u128) {
	total := p.prefix.Addr().BitLen()
	for lo.less(hi) {
		// The largest aligned block starting at lo that ends by hi.
		b := total
		for b > p.prefix.Bits() {
			size := blockSize(total, b-1)
			if a, _ := alignUp(lo, size); a != lo {
				break
			}
			end, over := lo.add(size)
			if over || hi.less(end) {
				break
			}
			b--
		}
		blk := netip.PrefixFrom(u128ToAddr(lo, total == 32), b)
		if _, ok := p.overlapsClaimed(blk); ok && b < total {
			// Split it: try the halves.
			half := blockSize(total, b+1)
			mid, _ := lo.add(half)
			p.freeRange(lo, mid)
			lo = mid
			continue
		}
		if _, ok := p.overlapsClaimed(blk); !ok {
			p.free[b] = append(p.free[b], blk)
		}
		next, over := lo.add(blockSize(total, b))
		if over {
			return
		}
		lo = next
	}
}

// claim marks an explicitly chosen block as held. It fails if the block is
// outside the pool or overlaps a block that is held.
func (p *pool) claim(b netip.Prefix, held func(netip.Prefix) bool) error {
	b = b.Masked()
	if !p.prefix.Contains(b.Addr()) || b.Bits() < p.prefix.Bits() {
		return fmt.Errorf("%s is not inside %s", b, p.prefix)
	}
	if held != nil && held(b) {
		return fmt.Errorf("%s is already in use", b)
	}
	// Remove it from the free lists if it was released before.
	for bitsLen, l := range p.free {
		for i, f := range l {
			if f.Overlaps(b) {
				if f == b {
					p.free[bitsLen] = append(l[:i:i], l[i+1:]...)
				} else {
					return fmt.Errorf("%s overlaps a released block %s; claim it before allocating", b, f)
				}
				break
			}
		}
	}
	p.claimed = append(p.claimed, b)
	return nil
}

// release returns a block to the pool.
func (p *pool) release(b netip.Prefix) {
	for i, c := range p.claimed {
		if c == b {
			p.claimed = append(p.claimed[:i:i], p.claimed[i+1:]...)
			break
		}
	}
	if !p.done && !addrToU128(b.Addr()).less(p.next) {
		return // the cursor has not got there yet and will hand it out fresh
	}
	p.free[b.Bits()] = append(p.free[b.Bits()], b)
}

// hostBits is 32 for IPv4 and 128 for IPv6.
func hostBits(a netip.Addr) int { return a.BitLen() }

// nthAddr returns the n-th address of a prefix (n small).
func nthAddr(p netip.Prefix, n uint64) netip.Addr {
	x, _ := addrToU128(p.Masked().Addr()).add(u128{lo: n})
	return u128ToAddr(x, p.Addr().Is4())
}

// netmask renders the mask of a prefix in dotted (IPv4) or colon (IPv6) form.
func netmask(p netip.Prefix) string {
	total := p.Addr().BitLen()
	var m u128
	for i := 0; i < p.Bits(); i++ {
		bit := total - 1 - i
		if bit >= 64 {
			m.hi |= 1 << (bit - 64)
		} else {
			m.lo |= 1 << bit
		}
	}
	return u128ToAddr(m, total == 32).String()
}
