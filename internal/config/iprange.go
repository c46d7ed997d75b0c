package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxIPRangeAddresses bounds how many addresses one iprange may expand to,
// so a typo such as "10.0.0.0/8" is a config error, not 16 M entries.
const maxIPRangeAddresses = 65536

// ParseIPRange expands an iprange setting, "a.a.a.a/b,c.c.c.c/e":
// comma-separated IPv4 CIDR blocks. Each block gives its host addresses from
// the address written (or the first host when the network address is
// written) up to the last host; the network and broadcast addresses are never
// handed out (except in /31 and /32 blocks, which have none). Addresses keep
// the written order; an address listed twice is an error.
func ParseIPRange(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("empty element in %q (want a.a.a.a/b,c.c.c.c/e)", s)
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IPv4 CIDR block such as 192.168.1.10/24", part)
		}
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("%q is not IPv4", part)
		}
		net := p.Masked()
		first, last := net.Addr(), lastAddr(net)
		if p.Bits() < 31 {
			first, last = first.Next(), last.Prev()
		}
		start := p.Addr()
		if start.Less(first) {
			start = first
		}
		if last.Less(start) {
			return nil, fmt.Errorf("%q holds no usable host address", part)
		}
		for a := start; ; a = a.Next() {
			if seen[a] {
				return nil, fmt.Errorf("address %s is listed twice in %q", a, s)
			}
			seen[a] = true
			out = append(out, a)
			if len(out) > maxIPRangeAddresses {
				return nil, fmt.Errorf("%q expands to more than %d addresses", s, maxIPRangeAddresses)
			}
			if a == last {
				break
			}
		}
	}
	return out, nil
}

// lastAddr returns the broadcast address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	hostBits := 32 - p.Bits()
	for i := 3; i >= 0 && hostBits > 0; i-- {
		n := min(hostBits, 8)
		b[i] |= byte(1<<n - 1)
		hostBits -= n
	}
	return netip.AddrFrom4(b)
}
