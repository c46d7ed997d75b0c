package config

import (
	"fmt"
	"net/netip"
)

// validateIPPlan checks each static range together with the gateway, DNS
// servers and subnet mask its workers are given (StaticNetworks, so a
// [[networks]] entry inherits the top-level values it leaves empty):
//   - no worker may be handed the gateway's or a DNS server's address;
//   - every address of the range and the gateway lie in one network of the
//     subnet mask (a worker outside its gateway's network has no route);
//   - no address of the range is the network or broadcast address of that
//     network.
//
// Ranges, gateways or masks that do not parse are reported by
// checkRangeSet and skipped here.
func (c *Config) validateIPPlan(es *Errors) {
	var nets []Network
	var keys []string
	if c.IPRange != "" {
		nets = append(nets, c.StaticNetworks()[0])
		keys = append(keys, "")
	}
	all := c.StaticNetworks()
	for i := range c.Networks {
		nets = append(nets, all[len(all)-len(c.Networks)+i])
		keys = append(keys, fmt.Sprintf("networks[%d].", i))
	}
	for i, n := range nets {
		checkIPPlan(es, keys[i], n)
	}
}

// checkIPPlan checks one range against its gateway, DNS and mask.
func checkIPPlan(es *Errors, prefix string, n Network) {
	addrs, err := ParseIPRange(n.IPRange)
	if err != nil || len(addrs) == 0 {
		return
	}
	in := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		in[a] = true
	}
	gw, gwErr := netip.ParseAddr(n.Gateway)
	hasGW := n.Gateway != "" && gwErr == nil && gw.Is4()
	if hasGW && in[gw] {
		es.add(prefix+"gateway", "%s is inside %siprange: a worker could be given the gateway's address (take it out of the range)", gw, prefix)
	}
	for _, d := range SplitList(n.DNS) {
		if a, err := netip.ParseAddr(d); err == nil && in[a] {
			es.add(prefix+"dns", "%s is inside %siprange: a worker could be given the DNS server's address (take it out of the range)", a, prefix)
		}
	}
	if n.SubnetMask == "" || checkMask(n.SubnetMask) != "" {
		return
	}
	m := netip.MustParseAddr(n.SubnetMask).As4()
	bits := 0
	for _, b := range m {
		for ; b != 0; b <<= 1 {
			bits++
		}
	}
	network := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, bits).Masked() }
	home := network(addrs[0])
	if hasGW && network(gw) != home {
		es.add(prefix+"gateway", "%s is outside the network %s of %siprange (subnetMask %s): the workers could not reach it", gw, home, prefix, n.SubnetMask)
	}
	for _, a := range addrs {
		if network(a) != home {
			es.add(prefix+"iprange", "address %s is outside the network %s of the range's first address (subnetMask %s): a range must lie in one network", a, home, n.SubnetMask)
			return
		}
	}
	if bits < 31 {
		for _, a := range addrs {
			switch a {
			case home.Addr():
				es.add(prefix+"iprange", "holds %s, the network address of %s (subnetMask %s): it cannot be given to a worker", a, home, n.SubnetMask)
				return
			case lastAddr(home):
				es.add(prefix+"iprange", "holds %s, the broadcast address of %s (subnetMask %s): it cannot be given to a worker", a, home, n.SubnetMask)
				return
			}
		}
	}
}
