package config

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// ipBlock is one declared block of an iprange, in plain uint32 arithmetic:
// an oracle independent of the netip walk ParseIPRange does.
type ipBlock struct {
	bits                            int
	network, broadcast, start, last uint32
}

func u32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

// ipBlocks splits s as the setting is documented: comma-separated IPv4 CIDR
// blocks. ok is false when an element is not one, or holds no usable host.
func ipBlocks(s string) (blocks []ipBlock, ok bool) {
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil || !p.Addr().Is4() {
			return nil, false
		}
		mask := ^uint32(0)
		if p.Bits() < 32 {
			mask = ^(^uint32(0) >> p.Bits())
		}
		if p.Bits() == 0 {
			mask = 0
		}
		b := ipBlock{bits: p.Bits(), network: u32(p.Addr()) & mask, start: u32(p.Addr())}
		b.broadcast = b.network | ^mask
		first, last := b.network, b.broadcast
		if b.bits < 31 {
			first, last = first+1, last-1
		}
		b.start, b.last = max(b.start, first), last
		if b.start > b.last {
			return nil, false
		}
		blocks = append(blocks, b)
	}
	return blocks, true
}

// checkIPRange asserts every property of ParseIPRange(s).
func checkIPRange(t *testing.T, s string) {
	t.Helper()
	got, err := ParseIPRange(s)
	blocks, ok := ipBlocks(s)

	// What the blocks expand to, and whether two of them overlap.
	total, overlap := uint64(0), false
	for i, b := range blocks {
		total += uint64(b.last-b.start) + 1
		for _, c := range blocks[:i] {
			if b.start <= c.last && c.start <= b.last {
				overlap = true
			}
		}
	}
	wantErr := !ok || overlap || total > maxIPRangeAddresses
	if wantErr != (err != nil) {
		t.Fatalf("ParseIPRange(%q) error = %v; want an error: %v (valid blocks %v, overlap %v, %d addresses)",
			s, err, wantErr, ok, overlap, total)
	}
	if err != nil {
		if got != nil {
			t.Fatalf("ParseIPRange(%q): %d addresses together with error %v", s, len(got), err)
		}
		return
	}

	if len(got) == 0 || len(got) > maxIPRangeAddresses || uint64(len(got)) != total {
		t.Fatalf("ParseIPRange(%q) gave %d addresses, want %d (1..%d)", s, len(got), total, maxIPRangeAddresses)
	}
	seen := make(map[netip.Addr]bool, len(got))
	i := 0
	for _, b := range blocks { // written order, block after block
		for want := uint64(b.start); want <= uint64(b.last); want++ {
			a := got[i]
			i++
			if !a.Is4() || a.Zone() != "" {
				t.Fatalf("%q: %v is not a plain IPv4 address", s, a)
			}
			if seen[a] {
				t.Fatalf("%q: %v handed out twice", s, a)
			}
			seen[a] = true
			v := u32(a)
			if uint64(v) != want {
				t.Fatalf("%q: address #%d is %v, want %v", s, i-1, a, netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, uint32(want)))))
			}
			if v < b.network || v > b.broadcast {
				t.Fatalf("%q: %v is outside its block", s, a)
			}
			if b.bits < 31 && (v == b.network || v == b.broadcast) {
				t.Fatalf("%q: %v is the network or broadcast address of a /%d", s, a, b.bits)
			}
		}
	}
}

func FuzzParseIPRange(f *testing.F) {
	for _, s := range []string{
		"192.168.1.0/30", "10.0.0.250/24", "10.1.1.1/32", "10.1.1.0/31", "10.0.1.1/32, 10.0.0.1/32",
		"10.0.0.1-10.0.0.5", "10.0.0.1/32,", ",", "", "fe80::1/64", "::ffff:10.0.0.1/128",
		"10.0.0.1/32,10.0.0.0/30", "10.0.0.0/8", "10.0.0.0/16", "10.0.0.3/30", "0.0.0.0/0",
		"255.255.255.255/32", "255.255.255.254/31", "0.0.0.0/31", "10.0.0.1/24 ,\t10.0.1.1/24",
		"10.0.0.1/33", "10.0.0.1/024", "10.0.0.01/24", "10.0.0.1", "10.0.0.0/32,10.0.0.0/24",
		"fe80::1%eth0/64", "10.0.0.0/24,10.0.0.4/30",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return // a setting, not a file: keeps each run short
		}
		checkIPRange(t, s)
	})
}

// FuzzParseIPRangeCIDR checks the same properties on well-formed random
// blocks, which the byte-level fuzzer rarely writes.
func FuzzParseIPRangeCIDR(f *testing.F) {
	f.Add(uint32(0xc0a80100), uint8(30), uint32(0), uint8(0), false)
	f.Add(uint32(0x0a0000fa), uint8(24), uint32(0x0a000105), uint8(31), true)
	f.Add(uint32(0xffffffff), uint8(32), uint32(0xfffffffe), uint8(31), true)
	f.Add(uint32(0x0a000000), uint8(16), uint32(0x0a000001), uint8(32), true)
	f.Add(uint32(0x0a000000), uint8(8), uint32(0), uint8(0), false)
	f.Add(uint32(0x0a000003), uint8(30), uint32(0x0a000000), uint8(32), true)
	f.Fuzz(func(t *testing.T, a uint32, abits uint8, b uint32, bbits uint8, two bool) {
		addr := func(v uint32) netip.Addr {
			return netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, v)))
		}
		s := fmt.Sprintf("%s/%d", addr(a), abits%33)
		if two {
			s += fmt.Sprintf(", %s/%d", addr(b), bbits%33)
		}
		checkIPRange(t, s)
	})
}
