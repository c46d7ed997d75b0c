// Package lifecycle holds what this hatchery process knows, in memory, about
// the VMs it is working on: one Table mapping each VM, keyed by its managed
// object id ("vm-42", a plain string; by name until it is known), to an
// entry with its phase, the time it entered that phase and the few facts
// the loops need (name, job, pool, deadline); and the one record of the
// spawns in flight, by job (Table.BeginSpawn).
//
// Every change of phase goes through a checked move (Table.Move and its
// variants, Must for the moves whose refusal is a bug), which checks the
// entry's current phase and the allowed transitions (the transitions table
// in phase.go) under one mutex: "check that the VM is idle, then claim it"
// is one atomic step, never two. The phase groups the loops test for are
// in groups.go.
//
// The package owns the phases, their transitions and groups only. It does not own
// the truth about a VM: that is the annotation written on the VM itself
// (internal/vsphere), and the table is an accelerator covering the windows
// before the inventory shows this process's own writes; it is empty after a
// restart and nothing in it is needed to rebuild the state. It knows
// nothing of vCenter, the inventory or the configuration, and imports no
// other internal package. See docs/lifecycle.md.
package lifecycle
