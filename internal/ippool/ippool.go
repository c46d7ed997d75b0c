package ippool

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// ReservationTTL is how long a locally reserved IP stays reserved
// (docs/design.md#ip-management): long enough for a clone to finish and
// the VM's annotation to show the IP in the inventory, short enough that a crashed spawn does not hold
// it for long. Reservations expire lazily on the next pick, with no
// goroutine per reservation.
const ReservationTTL = 5 * time.Minute

// ErrNoIPAvailable means every address of the configured ranges is used by
// a VM, reserved by a spawn in flight, or locked by another instance.
var ErrNoIPAvailable = errors.New("no ip address available")

// network is the settings shared by the addresses of one configured range.
type network struct {
	Gateway    string
	SubnetMask string
	DNS        []string
}

// Lease is one reserved static IP with its network settings.
type Lease struct {
	// IP is the address, dotted.
	IP string
	// Gateway, SubnetMask and DNS are the settings of the address's range.
	Gateway    string
	SubnetMask string
	DNS        []string
}

// Pool hands out static IPs from the configured ranges
// (docs/design.md#ip-management): the top-level iprange and each
// [[networks]] entry, in that order. The mutex is held only around the
// in-memory pick, never across a vCenter call: callers read the inventory
// first and pass the addresses its VMs hold in.
type Pool struct {
	addrs []netip.Addr
	net   map[netip.Addr]int // address -> index in nets
	nets  []network
	now   func() time.Time

	mu       sync.Mutex
	reserved map[netip.Addr]reservation
	locks    *lockState // nil: no locks (UseLocks not called)
}

// reservation is who holds a reserved address, and until when.
type reservation struct {
	owner string // the VM the address was reserved for
	until time.Time
}

// New parses the configured ranges; a config without range gives an
// empty pool (DHCP / template network settings).
func New(cfg *config.Config) (*Pool, error) {
	p := &Pool{net: map[netip.Addr]int{}, now: time.Now, reserved: map[netip.Addr]reservation{}}
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
		p.nets = append(p.nets, network{Gateway: strings.TrimSpace(s.gw), SubnetMask: mask, DNS: config.SplitList(s.dns)})
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

// Enabled tells whether static IPs are configured.
func (p *Pool) Enabled() bool { return p != nil && len(p.addrs) > 0 }

// expireLocked drops the reservations past their expiry. p.mu is held.
func (p *Pool) expireLocked(now time.Time) {
	for a, r := range p.reserved {
		if !now.Before(r.until) {
			delete(p.reserved, a)
		}
	}
}

// Reserve picks the first address that is not in used and not reserved,
// and reserves it for the VM named owner for ReservationTTL. used is what
// the VMs of a fresh read of the inventory, made before the call, hold
// (inventory.UsedBy, or the inventory.Index of the snapshot). With locks
// (UseLocks) the address is also one no other holder has locked, and it
// is taken through its lock before it is returned (locks.go): an address
// whose lock another instance holds is passed over for the next one.
func (p *Pool) Reserve(ctx context.Context, used map[netip.Addr]bool, owner string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	if !p.Enabled() {
		return Lease{}, errors.New("reserve ip: no ip range configured")
	}
	for {
		p.mu.Lock()
		now := p.now()
		p.expireLocked(now)
		a, ok := p.pickLocked(used)
		if ok {
			p.reserved[a] = reservation{owner: owner, until: now.Add(ReservationTTL)}
		}
		p.mu.Unlock()
		if !ok {
			return Lease{}, ErrNoIPAvailable
		}
		if p.locks == nil {
			return p.leaseOf(a), nil
		}
		taken, err := p.takeLock(ctx, a, owner)
		if err != nil {
			return Lease{}, err
		}
		if !taken {
			return p.leaseOf(a), nil
		}
	}
}

// pickLocked returns the first free address (freeLocked). p.mu is held.
func (p *Pool) pickLocked(used map[netip.Addr]bool) (netip.Addr, bool) {
	for _, a := range p.addrs {
		if p.freeLocked(a, used) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// freeLocked tells whether a can be handed out: not in used (held by a
// VM), not reserved, and not locked by another holder or being unlocked.
// Reserve picks by it and Counts counts by it, so the two never disagree.
// p.mu is held.
func (p *Pool) freeLocked(a netip.Addr, used map[netip.Addr]bool) bool {
	if _, reserved := p.reserved[a]; reserved || used[a] {
		return false
	}
	return p.locks == nil || !p.locks.unavailable(a)
}

// leaseOf builds the lease of an address of the pool.
func (p *Pool) leaseOf(a netip.Addr) Lease {
	n := p.nets[p.net[a]]
	return Lease{IP: a.String(), Gateway: n.Gateway, SubnetMask: n.SubnetMask, DNS: append([]string(nil), n.DNS...)}
}

// Lookup returns the settings of ip when it belongs to the pool.
func (p *Pool) Lookup(ip string) (Lease, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil || p == nil {
		return Lease{}, false
	}
	if _, ok := p.net[a]; !ok {
		return Lease{}, false
	}
	return p.leaseOf(a), true
}

// Release drops the local reservation of ip when it is owner's (its clone
// failed, or its VM was destroyed). A reservation of another VM is kept:
// a deletion decided on a snapshot older than the VM's destruction must
// not free the address a new spawn has just reserved.
func (p *Pool) Release(ip, owner string) {
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

// Available tells whether at least one address is free given the
// addresses VMs hold (inventory.UsedBy, or the inventory.Index of the
// snapshot).
func (p *Pool) Available(inUse map[netip.Addr]bool) bool {
	used, total := p.Counts(inUse)
	return used < total
}

// Counts returns how many addresses of the pool are not free (freeLocked:
// in inUse, held by VMs as inventory.UsedBy says, reserved, or locked by
// another holder), and the pool's size.
func (p *Pool) Counts(inUse map[netip.Addr]bool) (used, total int) {
	if !p.Enabled() {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.now())
	for _, a := range p.addrs {
		if !p.freeLocked(a, inUse) {
			used++
		}
	}
	return used, len(p.addrs)
}

// SetClock replaces the pool's clock (time.Now), by which reservations
// expire. Tests drive expiry with it; call it before the pool is shared.
func (p *Pool) SetClock(now func() time.Time) { p.now = now }

// Reserved returns the addresses reserved now (expired reservations
// dropped first), sorted as strings.
func (p *Pool) Reserved() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.now())
	out := make([]string, 0, len(p.reserved))
	for a := range p.reserved {
		out = append(out, a.String())
	}
	slices.Sort(out)
	return out
}
