// Package custody owns the writes the hatchery makes on its own VMs, the
// same for a worker's VM (internal/vsphere's spawn path and cleanup) and a
// warm-pool VM (internal/warmpool): the deletion mark (MarkToDelete), the
// deletion itself with its ownership checks (Delete), the write of a VM's
// ownership record (WriteRecord), the removal of a worker token from a
// cloud-init VM's guestinfo and the list of VMs still holding one
// (ScrubUserdata, TrackUserdata), and the quarantine's accounting of a
// spawn or provisioning attempt on a template (BeginAttempt, EndAttempt:
// the book, the log lines of a state change, the quarantined_templates
// gauge).
//
// It does not decide when to do these: the spawn path, the cleanup loops
// and the warm pool do, and both the hatchery and the pool hold the one
// Custody the hatchery builds in its New. The VM's phases are the
// lifecycle table's (internal/lifecycle); this package only moves them.
// It reaches vCenter through its Port, in the project's vocabulary
// (internal/vctypes), which vctypes.Port implements; it imports no govmomi package and never imports
// internal/vsphere or internal/warmpool.
package custody

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// Port is what the custody does to a VM in vCenter, in the project's
// vocabulary: every error carries its fault kind (vctypes.KindOf).
// vctypes.Port implements it.
type Port interface {
	// ShutdownVirtualMachine powers vm off; already off is success.
	ShutdownVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// DestroyVirtualMachine destroys vm; already gone is success.
	DestroyVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// ReconfigureVirtualMachine applies change to vm in one task: the
	// record write (its Record) and the userdata scrub (its Options,
	// cloudinit.ScrubOptions).
	ReconfigureVirtualMachine(ctx context.Context, vm vctypes.Ref, change vctypes.ConfigChange) error
}

// ErrDeleteInProgress means another loop is deleting the same VM now.
var ErrDeleteInProgress = errors.New("deletion already in progress")

// ScrubTimeout bounds the reconfigure removing a worker's userdata: one
// short extraConfig edit, detached from a possibly cancelled spawn so
// that the token is removed even during shutdown.
const ScrubTimeout = time.Minute

// Custody is one hatchery's writes on its VMs. The hatchery builds one in
// its New and sets every exported field before the first use; the warm
// pool holds the same pointer. It must not be copied.
type Custody struct {
	// Hatchery is the hatchery's name: a VM is in its custody when its
	// record names it (inventory.VM.OwnedBy).
	Hatchery string
	// Port reaches the VMs in vCenter.
	Port Port
	// Inventory lists the VMs; the custody invalidates it after its writes.
	Inventory inventory.Inventory
	// Life is the hatchery's lifecycle table.
	Life *lifecycle.Table
	// IPs holds the static IP reservations; a destroyed VM's is released.
	IPs *ippool.Pool
	// Quarantine is the book of broken templates (docs/design.md#quarantine).
	Quarantine *quarantine.Book
	// Metrics records the quarantined_templates gauge; nil: not recorded.
	Metrics *metrics.Metrics
	// Log receives one line per write and per quarantine change.
	Log *slog.Logger
	// ReportRegistration, when set, is called by Delete before it powers
	// off a registration VM (register- prefix or RegisterOnly record):
	// the hatchery reports a V1 registration that did not succeed.
	ReportRegistration func(ctx context.Context, vm inventory.VM)

	userdata userdataVMs
	// gauge serialises reading the quarantined count and recording it,
	// so that the gauge never ends on an older count.
	gauge sync.Mutex
}

// MarkToDelete records that the VM named name (ours) must be destroyed:
// the next cleanup pass powers it off and destroys it, retrying until it
// is gone (docs/lifecycle.md). It reports whether the mark is new: a VM
// already marked or being deleted stays as it is.
func (c *Custody) MarkToDelete(name string) bool {
	_, err := c.Life.MoveFrom(name, lifecycle.Markable(), lifecycle.Marked)
	return err == nil
}

// Power is what a deletion may do to a VM it finds running: the condition
// its decision rests on. Every caller of Delete says which
// (docs/high-availability.md, "Deletions decided on a listing").
type Power int

const (
	// StopRunning: the decision holds whatever the VM's power state: the
	// VM was marked for deletion by the loop that owns it, its worker is
	// past its TTL or never registered, or this process took it (a
	// surplus pool VM taken with a compare-and-swap). A running VM is
	// powered off, then destroyed.
	StopRunning Power = iota
	// OnlyPoweredOff: the decision rests on the VM being powered off (its
	// worker finished and its script powered it off): the VM is never
	// powered off. vCenter's destroy refuses a running VM, and that
	// refusal is the check: a VM started since the listing the decision
	// read (a spawn's power-on the listing had not shown yet) is left
	// alone and the deletion withdrawn (ErrWithdrawn).
	OnlyPoweredOff
)

// ErrWithdrawn means a deletion that rested on the VM being powered off
// found it running: the listing it was decided on was older than the VM's
// power-on. Nothing was done to the VM.
var ErrWithdrawn = errors.New("deletion withdrawn: the vm runs, the listing it was decided on showed it powered off")

// Delete destroys one VM of ours (docs/design.md#ownership), powering it
// off first when p is StopRunning. It refuses a VM that does not carry
// this hatchery's ownership record and any template but this hatchery's
// own model template, before any vCenter call. With OnlyPoweredOff it
// never powers the VM off: a VM the listing did not show powered off, or
// that vCenter refuses to destroy for its power state, is left alone
// (ErrWithdrawn, wrapped) and its entry goes back to where it was. For a
// registration VM it calls ReportRegistration first. The VM stays marked
// for deletion until the destroy succeeds, so a failure is retried by the
// next cleanup pass; ErrDeleteInProgress (wrapped) when another loop is
// deleting it now.
func (c *Custody) Delete(ctx context.Context, vm inventory.VM, p Power) error {
	if !vm.OwnedBy(c.Hatchery) {
		c.Log.Error("refusing to delete vm", logkey.VM, vm.Name, logkey.Detail, "not owned by this hatchery")
		return fmt.Errorf("delete vm %q: not owned by hatchery %q", vm.Name, c.Hatchery)
	}
	if vm.Template && !vm.Annotation.Model {
		c.Log.Error("refusing to delete vm", logkey.VM, vm.Name, logkey.Detail, "template that is not our model template")
		return fmt.Errorf("delete vm %q: a template that is not a model template of hatchery %q", vm.Name, c.Hatchery)
	}
	if p == OnlyPoweredOff && vm.Power() != vctypes.PoweredOff {
		return fmt.Errorf("delete vm %q: listed %s: %w", vm.Name, vm.Power(), ErrWithdrawn)
	}
	obj := vm.ObjectRef()
	prev, err := c.Life.MoveFrom(vm.Name, lifecycle.Deletable(), lifecycle.Deleting, lifecycle.WithRef(obj.Value))
	switch {
	case prev == lifecycle.Deleting:
		return fmt.Errorf("delete vm %q: %w", vm.Name, ErrDeleteInProgress)
	case err != nil:
		return fmt.Errorf("delete vm %q: %w", vm.Name, err)
	}
	outcome := lifecycle.Marked // a failure is retried by the next cleanup pass
	defer func() { c.Life.Must(vm.Name, lifecycle.Deleting, outcome, lifecycle.WithRef(obj.Value)) }()

	if c.ReportRegistration != nil && (vm.HasPrefix(workerpool.RegisterPrefix) || vm.Annotation.RegisterOnly) {
		c.ReportRegistration(ctx, vm)
	}

	defer c.Inventory.Invalidate() // even a failed task may have changed the VM
	if vm.Power() != vctypes.PoweredOff {
		// A VM gone already (not found: the other instance of this
		// hatchery destroyed it first) is not an error: the destroy below
		// answers it as done.
		if err := c.Port.ShutdownVirtualMachine(ctx, obj); err != nil && vctypes.KindOf(err) != vctypes.FaultNotFound {
			return fmt.Errorf("delete vm %q: power off: %w", vm.Name, err)
		}
	}
	err = c.Port.DestroyVirtualMachine(ctx, obj)
	if err != nil && vctypes.KindOf(err) == vctypes.FaultInvalidPowerState {
		// The listing was older than the VM's power state: the VM runs.
		if p == OnlyPoweredOff {
			// The decision rested on the VM being off: it is void. The
			// VM goes back to where it was, unmarked; the next pass
			// decides again on a fresher listing.
			outcome = withdrawnPhase(prev)
			return fmt.Errorf("delete vm %q: %w", vm.Name, ErrWithdrawn)
		}
		// The decision holds whatever the power state: power off,
		// retry once.
		if serr := c.Port.ShutdownVirtualMachine(ctx, obj); serr != nil {
			return fmt.Errorf("delete vm %q: power off: %w", vm.Name, serr)
		}
		err = c.Port.DestroyVirtualMachine(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("delete vm %q: destroy: %w", vm.Name, err)
	}
	// A snapshot taken before may still show it: never offered again
	// until a listing no longer shows it.
	outcome = lifecycle.Destroyed
	if ip := vm.Annotation.IPAddress; ip != "" {
		// The address is free again: drop the reservation its clone made
		// (if still its own), which would otherwise hold it until
		// ippool.ReservationTTL.
		c.IPs.Release(ip, vm.Name)
	}
	return nil
}

// withdrawnPhase is where a VM whose deletion was withdrawn goes back to,
// from the phase it was in before: Started keeps its launch time (the
// cleanup reads it in place of the missing record); anything else has no
// entry any more (a Marked VM is not marked again: a mark that rested on
// the same stale listing would power the running VM off next pass).
func withdrawnPhase(prev lifecycle.Phase) lifecycle.Phase {
	if prev == lifecycle.Started {
		return lifecycle.Started
	}
	return lifecycle.Gone
}

// WriteRecord writes annot (Notes and mirror) on vm, a VM of ours that
// the caller holds (cloned, claimed or being registered by this process),
// and invalidates the inventory's view of it.
func (c *Custody) WriteRecord(ctx context.Context, vm vctypes.Ref, annot *inventory.Annotation) error {
	rec := annot.Record()
	err := c.Port.ReconfigureVirtualMachine(ctx, vm, vctypes.ConfigChange{Record: &rec})
	c.Inventory.Invalidate(vm)
	if err != nil {
		return fmt.Errorf("write annotation of vm %q: %w", annot.WorkerName, err)
	}
	return nil
}
