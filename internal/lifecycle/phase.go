package lifecycle

import "strconv"

// Phase is where a VM stands in this process's work on it. The zero value,
// Gone, is "no entry": the table knows nothing of the VM (never tracked, or
// left), and only its annotation and the inventory speak for it.
type Phase uint8

// The phases, in the order a VM usually meets them. docs/lifecycle.md
// draws them and names the function behind every transition.
const (
	// Gone: no entry. A move to Gone removes the entry.
	Gone Phase = iota
	// Cloning: a spawn's (or a registration's) clone task is in flight;
	// the VM may not exist yet.
	Cloning
	// Provisioning: a warm-pool VM is being made (clone, wait for its IP,
	// power off; a hot pool's VM is suspended or left running instead).
	// The entry carries its pool.
	Provisioning
	// Idle: a warm-pool VM made by this process, ready in its idle state
	// (powered off, suspended or running: its annotation records which;
	// docs/lifecycle.md), that no inventory snapshot has shown yet. It counts in its pool until
	// a snapshot shows it or its deadline passes. An idle VM the inventory
	// shows has no entry: its annotation says it is idle.
	Idle
	// Claimed: a warm-pool VM taken by a spawn, under its provisioned name
	// (the entry carries its reference). It is never offered again, even
	// by a lagging snapshot that still shows it idle, until the inventory
	// no longer shows it as a pool VM.
	Claimed
	// Preparing: a claimed VM under its worker name, between its rename and
	// its power-on. Cleanup leaves it alone.
	Preparing
	// Running: a worker VM this process created or prepared, until the
	// inventory shows it or its deadline passes; it counts as a started
	// worker meanwhile.
	Running
	// Started: a worker launched by this process whose start could not be
	// written on the VM. The entry carries the launch time, which the
	// cleanup uses in place of the missing record until the VM is deleted.
	Started
	// Marked: marked for deletion; the next cleanup pass destroys the VM.
	// The entry carries since when its VM has been missing from the
	// inventory, if it is.
	Marked
	// Deleting: a deletion (power off, destroy) is at work on the VM. A
	// failure moves it back to Marked, a success to Destroyed; a deletion
	// withdrawn (decided on a VM seen powered off, found running:
	// custody.OnlyPoweredOff) puts it back where it was (Gone or Started).
	Deleting
	// Destroyed: this process destroyed the VM; an inventory snapshot
	// taken before may still show it. It is never claimed, counted in a
	// pool or deleted again; the entry (which carries the VM's reference)
	// leaves when a listing no longer shows that reference.
	Destroyed
	// Held: the VM of a failed spawn, kept powered on for inspection
	// (keepFailedWorkers). Its annotation carries the hold (until when,
	// why); the entry carries the same deadline. Only a deletion (the hold
	// expired, or a newer hold evicted it) ends it, or the inventory no
	// longer showing it.
	Held

	numPhases = iota
)

var phaseNames = [numPhases]string{
	Gone:         "gone",
	Cloning:      "cloning",
	Provisioning: "provisioning",
	Idle:         "idle",
	Claimed:      "claimed",
	Preparing:    "preparing",
	Running:      "running",
	Started:      "started",
	Marked:       "marked",
	Deleting:     "deleting",
	Destroyed:    "destroyed",
	Held:         "held",
}

// String is the phase's lower-case name, as docs/lifecycle.md spells it.
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// Phases lists every phase, Gone first.
func Phases() []Phase {
	out := make([]Phase, numPhases)
	for i := range out {
		out[i] = Phase(i)
	}
	return out
}

// transitions is the one place that says which moves are allowed: from a
// phase (key) to each phase listed. A move not listed here is refused.
// Adding a phase is adding its row and the rows that lead to it.
var transitions = map[Phase][]Phase{
	// Anything the table does not know yet may start being cloned or
	// provisioned, be claimed (a pool VM seen in the inventory), be
	// recorded as created or launched, be marked or be deleted (the
	// annotation decided).
	Gone: {Cloning, Provisioning, Claimed, Running, Started, Marked, Deleting},
	// The clone returned (the spawn records the VM next) or failed.
	Cloning: {Gone, Marked},
	// Ready and powered off (Idle until the inventory shows it; Gone when
	// the inventory is always fresh), or failed.
	Provisioning: {Idle, Gone, Marked},
	// Claimed by a spawn, shown by the inventory or expired, removed as
	// surplus (marked first), or deleted by cleanup.
	Idle: {Claimed, Gone, Marked, Deleting},
	// Prepared as the worker (the entry takes the worker's name), the
	// inventory no longer shows it as a pool VM, or the claim failed
	// before the rename.
	Claimed: {Preparing, Gone, Marked},
	// Powered on (the worker starts), or the preparation failed: marked
	// (under its pool name, the worker name forgotten, when the rename did
	// not happen).
	Preparing: {Running, Marked},
	// The start could not be recorded; the inventory shows it or the
	// deadline passed; the spawn failed or the worker is disabled; the
	// cleanup's verdict deletes it; the spawn failed and its VM is held
	// for inspection.
	Running: {Started, Gone, Marked, Deleting, Held},
	// Only a deletion ends it.
	Started: {Marked, Deleting},
	// The cleanup destroys it, or the mark is dropped after its VM was
	// missing from the inventory long enough.
	Marked: {Deleting, Gone},
	// Destroyed, or failed and retried by the next pass, or withdrawn:
	// a deletion that rested on the VM being powered off found it running
	// (the listing it was decided on was older than the VM's power-on);
	// the VM goes back to no entry, or to Started with its launch time.
	Deleting: {Destroyed, Marked, Gone, Started},
	// A listing no longer shows its reference; or it is deleted again (a
	// snapshot older than the destroy: vCenter answers "gone", a
	// success). A new VM under its name is another entry (another
	// reference); a destroyed VM is never marked again.
	Destroyed: {Gone, Deleting},
	// Evicted by a newer hold (marked), expired (the cleanup deletes it),
	// or no longer shown by the inventory.
	Held: {Marked, Deleting, Gone},
}

// Allowed reports whether the move from → to is in the transitions table.
func Allowed(from, to Phase) bool {
	for _, p := range transitions[from] {
		if p == to {
			return true
		}
	}
	return false
}
