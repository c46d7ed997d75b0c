package demo

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/instantparent"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// The demo's instant-clone model (demo.toml, docs/instant-clones.md): the
// hatchery keeps one running parent of its template per placement (and
// per flavor of another size a job asked for) and forks each job's worker
// from it. A --once run ends with these parents left beside the warm pool.

// instantTemplate is the instant model's template (demo.toml: cloneMode
// "instant", bootstrap "cloud-init").
const instantTemplate = "debian12-instant"

// recordOf is the hatchery's record of a VM as the simulator holds it: its
// Notes, else the ExtraConfig mirror (an instant parent's Notes hold a
// plain sentence once it is built, and a forked child inherits them: both
// keep their record in the mirror only). nil when the VM carries none.
func recordOf(st vcsimtest.VMState) *inventory.Annotation {
	if a, err := inventory.ParseAnnotation(st.Annotation); err == nil {
		return a
	}
	if a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey]); err == nil {
		return a
	}
	return nil
}

// isParentRecord tells whether a record of hatchery name, read on the VM
// named vm, is an instant parent's: the hatchery marks its parents with
// instant_parent and their own name (a child copies its parent's
// ExtraConfig, but writes its own record over the mirror).
func isParentRecord(a *inventory.Annotation, name, vm string) bool {
	return a != nil && a.HatcheryName == name && a.InstantParent && a.WorkerName == vm
}

// parentsLeft checks the instant parents left at the end of a --once run
// against what the configuration declares (instantparent.Wants): every
// parent left has a wanted key — an instant model's template, a placement
// of the configuration, the template's size or a flavor an instant job of
// the run asked for (flavors) — no key has two, and every instant model
// has its parent of the template's size in every placement. It returns
// what is wrong ("" when nothing) and the parents by key.
func parentsLeft(cfg *config.Config, parents []SimVM, flavors []string) (string, []string) {
	found := func(modelref.Template) (string, string, bool) { return "", "", true }
	var demand []instantparent.Key
	for _, p := range cfg.EffectivePlacements() {
		for _, g := range cfg.InstantEntries() {
			tpl := modelref.OfEntry(g.ModelPath, g.ModelVMWare)
			for _, f := range flavors {
				demand = append(demand, instantparent.Key{Template: tpl.Name, Placement: p.Name, Flavor: f})
			}
		}
	}
	wanted := map[instantparent.Key]bool{}
	var required []instantparent.Key
	for _, w := range instantparent.Wants(cfg, found, demand) {
		wanted[w.Key] = true
		if w.Key.Flavor == "" {
			required = append(required, w.Key)
		}
	}
	by := map[instantparent.Key][]string{}
	var bad []string
	for _, v := range parents {
		k := instantparent.KeyOf(v.Annotation.ParentTemplate, v.Annotation.Placement, v.Annotation.Flavor)
		if !wanted[k] {
			bad = append(bad, fmt.Sprintf("parent %s of %s, which the configuration does not declare", v.Name, k))
		}
		by[k] = append(by[k], v.Name)
	}
	var keys []string
	for k, names := range by {
		keys = append(keys, k.String())
		if len(names) > 1 {
			sort.Strings(names)
			bad = append(bad, fmt.Sprintf("%d parents of %s: %s", len(names), k, strings.Join(names, ", ")))
		}
	}
	for _, k := range required {
		if len(by[k]) == 0 {
			bad = append(bad, "no parent of "+k.String())
		}
	}
	sort.Strings(bad)
	sort.Strings(keys)
	return firstOf(bad), keys
}

// parentBoot tells whether a cloud-init boot is an instant parent's, by
// the record on its VM (st: the hatchery marks its parents with
// instant_parent; a parent's userdata starts no worker), and prints a line
// for it.
func (d *driver) parentBoot(b vcsimtest.CloudInitBoot, st vcsimtest.VMState) bool {
	a := recordOf(st)
	if !isParentRecord(a, d.cfg.CommonConfiguration.Name, b.VM) {
		return false
	}
	k := instantparent.KeyOf(a.ParentTemplate, a.Placement, a.Flavor)
	d.out.printf("instant parent %s (%s) booted, ip %s: no worker, children are forked from it", b.VM, k, b.IP)
	return true
}

// noteFork remembers that the simulator played b as an instant clone's
// child (vcsimtest.CloudInitBoot.Forked): a fork, not a clone.
func (d *driver) noteFork(b vcsimtest.CloudInitBoot) {
	if !b.Forked {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.forkedVMs == nil {
		d.forkedVMs = map[string]bool{}
	}
	d.forkedVMs[b.VM] = true
}

// forkNote is what a worker's launch line says of an instant job's VM:
// forked from a parent, or cloned (no parent ready yet: the hatchery falls
// back to a clone). It records which in the job's report.
func (d *driver) forkNote(j *jobLife, vm string) string {
	if !j.Instant {
		return ""
	}
	d.mu.Lock()
	f := d.forkedVMs[vm]
	delete(d.forkedVMs, vm)
	j.Forked = f
	d.mu.Unlock()
	if f {
		return " (forked from its placement's instant parent)"
	}
	return " (cloned: no instant parent ready yet)"
}
