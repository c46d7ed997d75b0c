package warmpool

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// maxVMNameLen is vSphere's limit on a VM's name (80 characters).
const maxVMNameLen = 80

// maxSlotStemLen bounds the readable part of a slot name (model and
// flavor) so that prefix, stem, hash and a slot number of up to five
// digits stay within maxVMNameLen.
const maxSlotStemLen = maxVMNameLen - len(v2Prefix) - 1 - slotHashLen - 1 - 5

// slotHashLen is the length of the pool hash in a slot name: it keeps two
// pools whose model and flavor read the same once sanitized (or
// truncated) apart.
const slotHashLen = 6

// slotPrefix is the name of the pool's slots without the slot number:
// warmpool-v2-<model>[-<flavor>]-<hash>- (V1: warmpool-v1-), lower-case
// and DNS-safe (docs/high-availability.md#pool-slots).
func (k Key) slotPrefix() string {
	stem := sanitizeSlotPart(k.Model)
	if k.Flavor != "" {
		stem += "-" + sanitizeSlotPart(k.Flavor)
	}
	if len(stem) > maxSlotStemLen {
		stem = strings.TrimRight(stem[:maxSlotStemLen], "-")
	}
	sum := sha256.Sum256([]byte(strconv.FormatBool(k.V1) + "\x00" + k.Model + "\x00" + k.Flavor))
	return k.prefix() + stem + "-" + hex.EncodeToString(sum[:])[:slotHashLen] + "-"
}

// SlotName is the VM name of slot (0 ≤ slot < the pool's number).
func (k Key) SlotName(slot int) string { return k.slotPrefix() + strconv.Itoa(slot) }

// sanitizeSlotPart keeps lower-case letters and digits and turns every run
// of anything else into one dash.
func sanitizeSlotPart(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// freeSlots returns up to n slot names of the pool (slots 0..number-1,
// lowest first) that no VM in vms carries and that the lifecycle table
// holds no entry for (an entry of a VM destroyed, or of a failed
// provisioning, that no listing shows is dropped first): the names a
// refill clones into. Two instances of
// one hatchery computing the same deficit pick the same names, and vCenter
// lets only one clone of a name succeed (DuplicateName for the other).
func (p *Pool) freeSlots(k Key, number, n int, vms []inventory.VM) []string {
	taken := map[string]bool{}
	listedRefs := map[string]bool{}
	prefix := k.slotPrefix()
	for _, v := range vms {
		listedRefs[v.ObjectRef().Value] = true
		if strings.HasPrefix(v.Name, prefix) {
			taken[v.Name] = true
		}
	}
	var out []string
	for slot := 0; slot < number && len(out) < n; slot++ {
		name := k.SlotName(slot)
		if taken[name] {
			continue
		}
		if e, ok := p.Life.Get(name); ok {
			switch {
			case e.Phase == lifecycle.Destroyed && !listedRefs[e.Ref]:
				// Destroyed and no longer listed: the slot is free again.
				p.dropSlotEntry(e, lifecycle.Destroyed)
			case e.Phase == lifecycle.Marked && p.Now().Sub(e.Since) > p.releaseGrace():
				// A failed provisioning whose VM no listing shows (it is
				// not in vms: taken above), past the time a snapshot takes
				// to show a new VM: there is nothing to destroy, and the
				// slot is free. Should a half-made VM of that name show up
				// later, the refill's clone fails with DuplicateName (the
				// slot counts as filled) and the cleanup judges that VM
				// from its record (a pool VM that never became ready).
				p.dropSlotEntry(e, lifecycle.Marked)
			}
		}
		if e, ok := p.Life.Get(name); ok && (e.Name == name || !listedRefs[e.Ref]) {
			// Being provisioned, claimed, marked or deleted here. An
			// entry found by a name it bore before (a claimed VM's slot
			// name) whose VM vms list under its new name leaves the slot
			// free: the refill's move takes the name.
			continue
		}
		out = append(out, name)
	}
	return out
}

// dropSlotEntry ends the stale entry e (phase from) of a slot's name so the
// slot can be refilled. Refused when another loop moved it since it was
// read (the cleanup deleting the name again): the slot stays taken this
// pass, which the caller reads from the table next.
func (p *Pool) dropSlotEntry(e lifecycle.Entry, from lifecycle.Phase) {
	if err := p.Life.Drop(e.Name, from, lifecycle.WithRef(e.Ref)); err != nil {
		p.Log.Debug("slot entry kept", logkey.VM, e.Name, logkey.Err, err)
	}
}
