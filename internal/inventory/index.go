package inventory

import (
	"net/netip"
	"unsafe"
)

// Index is what spawn decisions derive from one inventory snapshot: the
// addresses its VMs hold and the jobs its VMs serve. Building it scans and
// parses every VM (~1 ms per 1,000 VMs); a shared inventory builds it once
// per refresh instead of once per decision. It is read-only once built.
type Index struct {
	// Used holds the addresses the VMs hold (UsedBy).
	Used map[netip.Addr]bool
	// Jobs maps a job id to the name of the first VM serving it.
	Jobs map[string]string
}

// newIndex indexes vms.
func newIndex(vms []VM) *Index {
	x := &Index{Used: UsedBy(vms), Jobs: map[string]string{}}
	for _, v := range vms {
		// A held VM (a failed spawn kept for inspection, docs/design.md#debug-hold)
		// no longer serves its job: the job may be spawned again.
		if v.Annotation != nil && v.Annotation.JobID != "" && !v.Annotation.Held() {
			if _, ok := x.Jobs[v.Annotation.JobID]; !ok {
				x.Jobs[v.Annotation.JobID] = v.Name
			}
		}
	}
	return x
}

// indexed is an Inventory that keeps the index of its current
// snapshot. indexOf returns it when vms is that very snapshot (same backing
// array: snapshots are never modified), else nil.
type indexed interface {
	indexOf(vms []VM) *Index
}

// IndexOf returns the index of vms: inv's own when vms is its current
// snapshot (a shared inventory indexes each snapshot once), else one built
// now. The result is read-only.
func IndexOf(inv Inventory, vms []VM) *Index {
	if ii, ok := inv.(indexed); ok {
		if x := ii.indexOf(vms); x != nil {
			return x
		}
	}
	return newIndex(vms)
}

// sameSnapshot tells whether a and b are the same slice (same backing
// array and length), not merely equal.
func sameSnapshot(a, b []VM) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// UsedBy returns the addresses held by VMs: the annotation IP of every VM
// (powered off too: it keeps its IP) and every guest IP.
func UsedBy(vms []VM) map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			used[a] = true
		}
	}
	for _, v := range vms {
		if v.Annotation != nil {
			add(v.Annotation.IPAddress)
		}
		for _, ip := range v.IPAddresses {
			add(ip)
		}
	}
	return used
}
