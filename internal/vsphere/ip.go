package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// ipReservationTTL is how long a locally reserved IP stays reserved
// (docs/design.md#ip-management): long enough for a clone to finish and the VM's annotation to show
// the IP in the inventory, short enough that a crashed spawn does not hold
// it for long. Reservations expire lazily on the next pick, with no
// goroutine per reservation.
const ipReservationTTL = 5 * time.Minute

// ErrNoIPAvailable means every address of the configured ranges is used by
// a VM or reserved by a spawn in flight.
var ErrNoIPAvailable = errors.New("no ip address available")

// ipNetwork is the settings shared by the addresses of one configured range.
type ipNetwork struct {
	Gateway    string
	SubnetMask string
	DNS        []string
}

// ipLease is one reserved static IP with its network settings.
type ipLease struct {
	IP         string
	Gateway    string
	SubnetMask string
	DNS        []string
}

// ipPool hands out static IPs from the configured ranges (docs/design.md#ip-management): the
// top-level iprange and each [[networks]] entry, in that order. The mutex is
// held only around the in-memory pick, never across a vCenter call: callers
// read the inventory first and pass its VMs in.
type ipPool struct {
	addrs []netip.Addr
	net   map[netip.Addr]int // address -> index in nets
	nets  []ipNetwork
	now   func() time.Time

	mu       sync.Mutex
	reserved map[netip.Addr]ipReservation
}

// ipReservation is who holds a reserved address, and until when.
type ipReservation struct {
	owner string // the VM the address was reserved for
	until time.Time
}

// newIPPool parses the configured ranges; a config without range gives an
// empty pool (DHCP / template network settings).
func newIPPool(cfg *config.Config) (*ipPool, error) {
	p := &ipPool{net: map[netip.Addr]int{}, now: time.Now, reserved: map[netip.Addr]ipReservation{}}
	type rangeSet struct {
		key                 string
		iprange, gw, dns, m string
	}
	sets := []rangeSet{}
	if strings.TrimSpace(cfg.IPRange) != "" {
		sets = append(sets, rangeSet{"iprange", cfg.IPRange, cfg.Gateway, cfg.DNS, cfg.SubnetMask})
	}
	for i, n := range cfg.Networks {
		sets = append(sets, rangeSet{fmt.Sprintf("networks[%d].iprange", i), n.IPRange, n.Gateway, n.DNS, n.SubnetMask})
	}
	for _, s := range sets {
		addrs, err := config.ParseIPRange(s.iprange)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.key, err)
		}
		mask := strings.TrimSpace(s.m)
		if mask == "" {
			mask = maskOf(s.iprange)
		}
		p.nets = append(p.nets, ipNetwork{Gateway: strings.TrimSpace(s.gw), SubnetMask: mask, DNS: config.SplitList(s.dns)})
		for _, a := range addrs {
			if _, dup := p.net[a]; dup {
				return nil, fmt.Errorf("%s: address %s is already in another range", s.key, a)
			}
			p.net[a] = len(p.nets) - 1
			p.addrs = append(p.addrs, a)
		}
	}
	return p, nil
}

// maskOf returns the dotted subnet mask of the first block of an iprange.
func maskOf(iprange string) string {
	first, _, _ := strings.Cut(iprange, ",")
	pfx, err := netip.ParsePrefix(strings.TrimSpace(first))
	if err != nil || !pfx.Addr().Is4() {
		return ""
	}
	var b [4]byte
	for i := 0; i < pfx.Bits(); i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b).String()
}

// enabled tells whether static IPs are configured.
func (p *ipPool) enabled() bool { return p != nil && len(p.addrs) > 0 }

// expireLocked drops the reservations past their expiry. p.mu is held.
func (p *ipPool) expireLocked(now time.Time) {
	for a, r := range p.reserved {
		if !now.Before(r.until) {
			delete(p.reserved, a)
		}
	}
}

// reserve picks the first address that no VM of vms uses and that is not
// reserved, and reserves it for the VM named owner for ipReservationTTL.
// vms must be a fresh read of the inventory made before the call.
func (p *ipPool) reserve(ctx context.Context, vms []VM, owner string) (ipLease, error) {
	return p.reserveFree(ctx, usedBy(vms), owner)
}

// reserveFree is reserve given the addresses the VMs use (usedBy, or the
// vmIndex of the snapshot).
func (p *ipPool) reserveFree(ctx context.Context, used map[netip.Addr]bool, owner string) (ipLease, error) {
	if err := ctx.Err(); err != nil {
		return ipLease{}, err
	}
	if !p.enabled() {
		return ipLease{}, errors.New("reserve ip: no ip range configured")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.expireLocked(now)
	for _, a := range p.addrs {
		if used[a] {
			continue
		}
		if _, ok := p.reserved[a]; ok {
			continue
		}
		p.reserved[a] = ipReservation{owner: owner, until: now.Add(ipReservationTTL)}
		return p.leaseOf(a), nil
	}
	return ipLease{}, ErrNoIPAvailable
}

// leaseOf builds the lease of an address of the pool.
func (p *ipPool) leaseOf(a netip.Addr) ipLease {
	n := p.nets[p.net[a]]
	return ipLease{IP: a.String(), Gateway: n.Gateway, SubnetMask: n.SubnetMask, DNS: append([]string(nil), n.DNS...)}
}

// lookup returns the settings of ip when it belongs to the pool.
func (p *ipPool) lookup(ip string) (ipLease, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil || p == nil {
		return ipLease{}, false
	}
	if _, ok := p.net[a]; !ok {
		return ipLease{}, false
	}
	return p.leaseOf(a), true
}

// release drops the local reservation of ip when it is owner's (its clone
// failed, or its VM was destroyed). A reservation of another VM is kept:
// a deletion decided on a snapshot older than the VM's destruction must
// not free the address a new spawn has just reserved.
func (p *ipPool) release(ip, owner string) {
	a, err := netip.ParseAddr(ip)
	if err != nil || p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.reserved[a]; ok && r.owner == owner {
		delete(p.reserved, a)
	}
}

// available tells whether at least one address is free given the
// addresses VMs hold (usedBy, or the vmIndex of the snapshot).
func (p *ipPool) available(inUse map[netip.Addr]bool) bool {
	used, total := p.countsUsed(inUse)
	return used < total
}

// counts returns how many addresses of the pool are used by a VM of vms or
// reserved, and the pool's size.
func (p *ipPool) counts(vms []VM) (used, total int) {
	if !p.enabled() {
		return 0, 0
	}
	return p.countsUsed(usedBy(vms))
}

// countsUsed is counts given the addresses the VMs use.
func (p *ipPool) countsUsed(inUse map[netip.Addr]bool) (used, total int) {
	if !p.enabled() {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.now())
	for _, a := range p.addrs {
		if _, ok := p.reserved[a]; ok || inUse[a] {
			used++
		}
	}
	return used, len(p.addrs)
}
