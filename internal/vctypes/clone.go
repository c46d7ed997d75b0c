package vctypes

// Template is what a clone needs to know of its template, read in one
// request (vcenter.Port.LoadTemplate): how many network cards it has (a
// guest customization maps each), its virtual disks (a flavor's growth,
// a linked clone's datastore) and its snapshots (a linked clone's). The
// hatchery decides the clone mode from it (internal/clonespec).
type Template struct {
	// Ref is the template's reference.
	Ref Ref
	// NICs is the number of its network cards.
	NICs int
	// Disks are its virtual disks, in device order.
	Disks []Disk
	// CurrentSnapshot is its current snapshot (zero: none).
	CurrentSnapshot Ref
	// Snapshots are every snapshot of it, depth first.
	Snapshots []Snapshot
}

// Disk is one virtual disk of a template: its size and the datastore its
// backing file is on (zero when the backing names none).
type Disk struct {
	CapacityBytes int64
	Datastore     Ref
}

// Snapshot is one snapshot of a template: its name and reference.
type Snapshot struct {
	Name string
	Ref  Ref
}
