package placement

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Footprint is what one clone takes: its vCPUs, its memory and, when
// known, the bytes its disks take on the datastore (0: unknown).
type Footprint struct {
	CPUs      int64
	MemoryMB  int64
	DiskBytes int64
}

// Datastore is one datastore of a placement as a decision sees it: its
// configured name and its space as last read (nil: not read, its room
// unknown).
type Datastore struct {
	Name  string
	Space *vctypes.DatastoreSpace
}

// Figures are one placement's figures at a decision: its configuration,
// what this hatchery has there (its VMs counted from their records plus
// the clones in flight towards it), its pool's runtime and its
// datastores' space as last read.
type Figures struct {
	// Placement is the placement's configuration (EffectivePlacements).
	Placement config.Placement
	// VMs, CPUs and MemoryMB are this hatchery's VMs there (powered on
	// for CPUs and memory) plus the clones in flight towards it.
	VMs      int
	CPUs     int64
	MemoryMB int64
	// InFlightMemoryMB is the memory of the clones in flight towards it:
	// its pool does not show them yet.
	InFlightMemoryMB int64
	// TasksInFlight are its clones in flight.
	TasksInFlight int
	// Pool is its resource pool's runtime (nil: not read).
	Pool *vctypes.PoolRuntime
	// Datastores are its configured datastores (none: the default
	// datastore, whose space is not read).
	Datastores []Datastore
}

// FloorBytes is the free space below which the placement's datastores
// take no clone.
func (f Figures) FloorBytes() int64 { return f.Placement.DatastoreFloorGB << 30 }

// Eligibility tells whether a placement may take a clone now, and why
// not: a Book's state (cordoned, backing off, probing).
type Eligibility func(name string) (ok bool, why Why)

// Choice is a decision: the placement taken and its datastore, or none,
// with the reason each placement was not taken.
type Choice struct {
	// OK is false when no placement can take the clone.
	OK bool
	// Placement is the placement taken; Index its position in the figures.
	Placement string
	Index     int
	// Datastore is the datastore taken ("" : the default datastore).
	Datastore string
	// Headroom is the taken placement's weighted headroom: how many more
	// clones of the footprint fit, times its weight (Unlimited when
	// nothing it reads limits it).
	Headroom int64
	// NotTaken says, per placement name, why it was not taken.
	NotTaken map[string]Why
}

// Unlimited is the headroom of a placement nothing limits (no own limit,
// pool and datastores unread or unlimited): large enough that any counted
// headroom is below it, small enough that a weight cannot overflow it.
const Unlimited int64 = 1 << 40

// Reason is the Choice's account of the placements not taken, one
// "name: why" per placement in name order (for the one log line).
func (c Choice) Reason() string {
	names := make([]string, 0, len(c.NotTaken))
	for n := range c.NotTaken {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ": " + c.NotTaken[n].String()
	}
	return strings.Join(parts, "; ")
}

// Headroom is how many more clones of fp fit in the placement whose
// figures are f (Unlimited when nothing limits it), the datastore it would
// take ("" when none is configured), and why none fits when it is 0.
// What limits it: its own maxVMs, maxCpus, maxMemoryMB and
// maxConcurrentTasks; its pool's unreserved CPU (none left: 0) and
// memory (less the clones in flight, which the pool does not show); its
// datastores' free space above the floor (the one with the most is
// taken; with the clone's disk size unknown, a datastore at or below
// its floor takes none).
func Headroom(fp Footprint, f Figures) (room int64, datastore string, why Why) {
	room = Unlimited
	limit := func(r int64, what Why) {
		if r < room {
			room = r
			if r <= 0 {
				why = what
			}
		}
	}
	p := f.Placement
	if p.MaxVMs > 0 {
		limit(int64(p.MaxVMs-f.VMs), Why{WhyMaxVMs, fmt.Sprintf("maxVMs %d reached", p.MaxVMs)})
	}
	if p.MaxConcurrentTasks > 0 {
		limit(int64(p.MaxConcurrentTasks-f.TasksInFlight), Why{WhyMaxTasks, fmt.Sprintf("maxConcurrentTasks %d in flight", p.MaxConcurrentTasks)})
	}
	if p.MaxCPUs > 0 {
		limit(per(int64(p.MaxCPUs)-f.CPUs, fp.CPUs), Why{WhyMaxCPUs, fmt.Sprintf("maxCpus %d reached", p.MaxCPUs)})
	}
	if p.MaxMemoryMB > 0 {
		limit(per(p.MaxMemoryMB-f.MemoryMB, fp.MemoryMB), Why{WhyMaxMemory, fmt.Sprintf("maxMemoryMB %d reached", p.MaxMemoryMB)})
	}
	if f.Pool != nil {
		if f.Pool.CPUUnreservedMHz <= 0 {
			limit(0, Why{WhyPoolCPU, "resource pool has no unreserved cpu"})
		}
		limit(per(f.Pool.MemoryUnreservedBytes>>20-f.InFlightMemoryMB, fp.MemoryMB), Why{WhyPoolMemory, "resource pool unreserved memory insufficient"})
	}
	if len(f.Datastores) > 0 && room > 0 {
		ds, dsRoom, dsWhy := pickDatastore(fp, f)
		if ds == "" {
			return 0, "", Why{WhyDatastores, dsWhy}
		}
		datastore = ds
		limit(dsRoom, Why{WhyDatastores, dsWhy})
	}
	if room < 0 {
		room = 0
	}
	return room, datastore, why
}

// per is how many needs fit in left; Unlimited for a need of 0 with room
// left.
func per(left, need int64) int64 {
	switch {
	case left <= 0 && need > 0:
		return 0
	case left < 0:
		return 0
	case need <= 0:
		return Unlimited
	}
	return left / need
}

// pickDatastore returns, of f's datastores, the one with the most free
// space above the floor that can hold the clone, how many clones of fp it
// holds, and, when none can, why. A datastore not read yet is taken only
// when no read one fits (its room is unknown: counted as one clone).
func pickDatastore(fp Footprint, f Figures) (name string, room int64, why string) {
	floor := f.FloorBytes()
	best, bestAbove := "", int64(-1)
	unread := ""
	var whys []string
	for _, d := range f.Datastores {
		if d.Space == nil {
			if unread == "" {
				unread = d.Name
			}
			continue
		}
		if !d.Space.Accessible {
			whys = append(whys, fmt.Sprintf("datastore %s inaccessible", d.Name))
			continue
		}
		above := d.Space.FreeBytes - floor
		if above <= 0 || above < fp.DiskBytes {
			whys = append(whys, fmt.Sprintf("datastore %s at its floor (%d GB free, floor %d GB)", d.Name, d.Space.FreeBytes>>30, floor>>30))
			continue
		}
		if above > bestAbove {
			best, bestAbove = d.Name, above
		}
	}
	switch {
	case best != "" && fp.DiskBytes > 0:
		return best, bestAbove / fp.DiskBytes, ""
	case best != "":
		return best, Unlimited, ""
	case unread != "":
		return unread, 1, ""
	}
	return "", 0, strings.Join(whys, ", ")
}

// Choose is the decision for one clone of footprint fp among the
// placements whose figures are figs (configuration order): of the eligible
// ones with room for it, the one with the most headroom times its weight;
// ties go to the one with fewer VMs, then to the first name. Each
// placement not taken gets its reason in Choice.NotTaken.
func Choose(fp Footprint, figs []Figures, eligible Eligibility) Choice {
	c := Choice{Index: -1, NotTaken: map[string]Why{}}
	rooms := make([]int64, len(figs))
	dss := make([]string, len(figs))
	for i, f := range figs {
		name := f.Placement.Name
		if eligible != nil {
			if ok, why := eligible(name); !ok {
				c.NotTaken[name] = why
				rooms[i] = -1
				continue
			}
		}
		room, ds, why := Headroom(fp, f)
		if room <= 0 {
			c.NotTaken[name] = why
			rooms[i] = -1
			continue
		}
		rooms[i], dss[i] = weighted(room, f.Placement.EffectiveWeight()), ds
		if c.Index < 0 || rooms[i] > c.Headroom ||
			(rooms[i] == c.Headroom && (f.VMs < figs[c.Index].VMs || (f.VMs == figs[c.Index].VMs && name < c.Placement))) {
			c.OK, c.Placement, c.Index, c.Datastore, c.Headroom = true, name, i, ds, rooms[i]
		}
	}
	for i, f := range figs {
		if rooms[i] < 0 || i == c.Index {
			continue
		}
		if rooms[i] == c.Headroom {
			c.NotTaken[f.Placement.Name] = Why{WhySameHeadroom, fmt.Sprintf("same headroom (%s), more vms or a later name", headroomText(rooms[i]))}
		} else {
			c.NotTaken[f.Placement.Name] = Why{WhyLessHeadroom, fmt.Sprintf("less headroom (%s against %s)", headroomText(rooms[i]), headroomText(c.Headroom))}
		}
	}
	return c
}

// weighted is room times weight, Unlimited at most.
func weighted(room int64, weight int) int64 {
	if room >= Unlimited/int64(weight) {
		return Unlimited
	}
	return room * int64(weight)
}

// headroomText is a headroom for the log.
func headroomText(h int64) string {
	if h >= Unlimited {
		return "unlimited"
	}
	return fmt.Sprintf("%d clones", h)
}

// HeadroomOf returns, for status lines, what a clone may still take in
// the placement: the least of its own limits and its pool's unreserved
// room, in vCPUs and MB; Unknown when nothing limits it.
func HeadroomOf(f Figures) (cpus, memoryMB int64) {
	cpus, memoryMB = Unknown, Unknown
	if f.Placement.MaxCPUs > 0 {
		cpus = max(0, int64(f.Placement.MaxCPUs)-f.CPUs)
	}
	if f.Placement.MaxMemoryMB > 0 {
		memoryMB = max(0, f.Placement.MaxMemoryMB-f.MemoryMB)
	}
	if f.Pool != nil {
		m := max(0, f.Pool.MemoryUnreservedBytes>>20-f.InFlightMemoryMB)
		if memoryMB == Unknown || m < memoryMB {
			memoryMB = m
		}
	}
	return cpus, memoryMB
}
