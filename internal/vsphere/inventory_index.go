package vsphere

import (
	"net/netip"
	"unsafe"
)

// vmIndex is what spawn decisions derive from one inventory snapshot: the
// addresses its VMs hold and the jobs its VMs serve. Building it scans and
// parses every VM (~1 ms per 1,000 VMs); a shared inventory builds it once
// per refresh instead of once per decision. It is read-only once built.
type vmIndex struct {
	used map[netip.Addr]bool // usedBy(vms)
	jobs map[string]string   // job id -> name of the first VM serving it
}

// newVMIndex indexes vms.
func newVMIndex(vms []VM) *vmIndex {
	x := &vmIndex{used: usedBy(vms), jobs: map[string]string{}}
	for _, v := range vms {
		if v.Annotation != nil && v.Annotation.JobID != "" {
			if _, ok := x.jobs[v.Annotation.JobID]; !ok {
				x.jobs[v.Annotation.JobID] = v.Name
			}
		}
	}
	return x
}

// indexedInventory is an Inventory that keeps the index of its current
// snapshot. indexOf returns it when vms is that very snapshot (same backing
// array: snapshots are never modified), else nil.
type indexedInventory interface {
	indexOf(vms []VM) *vmIndex
}

// sameSnapshot tells whether a and b are the same slice (same backing
// array and length), not merely equal.
func sameSnapshot(a, b []VM) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// usedBy returns the addresses held by VMs: the annotation IP of every VM
// (powered off too: it keeps its IP) and every guest IP.
func usedBy(vms []VM) map[netip.Addr]bool {
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
