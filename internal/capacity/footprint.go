package capacity

// Footprint is what one worker VM takes, or a sum of them: vCPUs and RAM.
type Footprint struct {
	CPUs     int64
	MemoryMB int64
}

// Add returns f + o.
func (f Footprint) Add(o Footprint) Footprint {
	return Footprint{CPUs: f.CPUs + o.CPUs, MemoryMB: f.MemoryMB + o.MemoryMB}
}

// Times returns n × f.
func (f Footprint) Times(n int64) Footprint {
	return Footprint{CPUs: f.CPUs * n, MemoryMB: f.MemoryMB * n}
}

// Flavor is the size of a named flavor, as the decisions need it.
type Flavor struct {
	Name     string
	CPUs     int64
	MemoryMB int64
}

// Footprint is the flavor's size.
func (f Flavor) Footprint() Footprint { return Footprint{CPUs: f.CPUs, MemoryMB: f.MemoryMB} }

// VMUsage is what the decisions need of one VM of an inventory snapshot.
type VMUsage struct {
	Name string
	// JobID is the job of the worker the VM runs ("" for none).
	JobID    string
	CPUs     int64
	MemoryMB int64
	// PoweredOn is true only for a VM powered on (not off, not suspended).
	PoweredOn bool
	// Template is true for a template.
	Template bool
	// Owned tells whether the VM's ownership record names this hatchery.
	Owned bool
	// Provisioning is true for a warm-pool VM being provisioned: its
	// reservation key is ProvisionKey(Name).
	Provisioning bool
}

// Usage is what this hatchery's VMs hold according to one inventory
// snapshot: VMs it owns, not templates, powered on (docs/design.md#allocated).
type Usage struct {
	Footprint
	// VMs is the number of VMs counted.
	VMs int
	// Keys holds the reservation keys of the counted VMs (their job ids,
	// ProvisionKey of a provisioning VM): a reservation for one of them is
	// already counted through its VM and is skipped.
	Keys map[string]bool
}

// Count sums the hardware of the owned VMs that are powered on and not
// templates. Powered-off VMs (the warm pool, a clone not yet started) and
// VMs of anyone else are not counted.
func Count(vms []VMUsage) Usage {
	u := Usage{Keys: map[string]bool{}}
	for _, v := range vms {
		if v.Template || !v.PoweredOn || !v.Owned {
			continue
		}
		u.CPUs += v.CPUs
		u.MemoryMB += v.MemoryMB
		u.VMs++
		if v.JobID != "" {
			u.Keys[v.JobID] = true
		}
		if v.Provisioning {
			u.Keys[ProvisionKey(v.Name)] = true
		}
	}
	return u
}

// ProvisionKey is the reservation key of a provisioning clone (its VM has
// no job).
func ProvisionKey(name string) string { return "provision:" + name }

// TemplateFootprint is the hardware of the first of names found in vms
// with known CPUs and memory (a template preferred over a VM of the same
// name); false when none is.
func TemplateFootprint(vms []VMUsage, names []string) (Footprint, bool) {
	for _, name := range names {
		var found *VMUsage
		for i := range vms {
			v := &vms[i]
			if v.Name != name {
				continue
			}
			if found == nil || (v.Template && !found.Template) {
				found = v
			}
		}
		if found != nil && found.CPUs > 0 && found.MemoryMB > 0 {
			return Footprint{CPUs: found.CPUs, MemoryMB: found.MemoryMB}, true
		}
	}
	return Footprint{}, false
}

// SmallestSmaller returns the flavor kept in reserve when f is spawned:
// the smallest flavor with fewer vCPUs than f (ties broken by less memory,
// then by name); false when f is the smallest.
func SmallestSmaller(flavors []Flavor, f Flavor) (smallest Flavor, ok bool) {
	for _, c := range flavors {
		if c.CPUs >= f.CPUs || c.CPUs <= 0 {
			continue
		}
		if !ok || c.CPUs < smallest.CPUs ||
			(c.CPUs == smallest.CPUs && c.MemoryMB < smallest.MemoryMB) ||
			(c.CPUs == smallest.CPUs && c.MemoryMB == smallest.MemoryMB && c.Name < smallest.Name) {
			smallest, ok = c, true
		}
	}
	return smallest, ok
}

// StarvationReserve is the footprint kept free for smaller flavors when f
// is spawned: count × the smallest smaller flavor, and that flavor; zero
// and nil when count is 0, f is nil (template resources) or f is the
// smallest flavor.
func StarvationReserve(flavors []Flavor, f *Flavor, count int) (Footprint, *Flavor) {
	if f == nil || count <= 0 {
		return Footprint{}, nil
	}
	s, ok := SmallestSmaller(flavors, *f)
	if !ok {
		return Footprint{}, nil
	}
	return s.Footprint().Times(int64(count)), &s
}
