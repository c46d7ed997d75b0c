package vcheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// checkedTemplate is a template the configuration names and what its
// model needs of it.
type checkedTemplate struct {
	key, name string
	settings  config.ModelSettings
}

// topology runs `config check --online`'s own check (vsphere.CheckTopology)
// and reports its problems: each missing privilege under "privileges"
// with the object missing it, every other problem under "topology" with
// its key. It returns the templates to try; false when a problem stops
// the check before it creates anything.
func (r *runner) topology(ctx context.Context) ([]checkedTemplate, bool) {
	start := time.Now()
	_, rep, err := vsphere.CheckTopology(ctx, r.vc, r.cfg)
	if err != nil {
		r.outcome("topology", "configuration", start, err, "")
		return nil, false
	}
	ok := true
	for _, p := range rep.Problems {
		key := config.KeyPrefix + "." + p.Key
		if p.Missing != "" {
			res := r.add("privileges", p.Object, start, Fail, p.Problem)
			res.Fault = vctypes.FaultNoPermission.Error()
			res.Fix = fmt.Sprintf("grant %s on %s to the vCenter user (a role on that object or above; key %s)", p.Missing, p.Object, key)
			continue
		}
		res := r.add("topology", key, start, Fail, p.Problem)
		res.Fix = "change " + key + " to an object of this vCenter (listed above when it helps)"
		ok = false
	}
	for _, n := range rep.Notes {
		r.add("privileges", "session", start, Unsupported, n)
	}
	if ok {
		r.add("topology", "configuration", start, Pass, fmt.Sprintf("%d object(s) resolved", len(rep.Resolved)))
	}
	seen := map[string]bool{}
	var out []checkedTemplate
	for _, t := range vsphere.TopologyRequest(r.cfg).Templates {
		if seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		model := sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: t.Name}}
		out = append(out, checkedTemplate{key: t.Key, name: t.Name, settings: r.cfg.SettingsOf(model)})
	}
	return out, ok
}

// locks proves vCenter's unique-name arbitration, which static IPs rely
// on: a lock object made twice is refused the second time.
func (r *runner) locks(ctx context.Context) {
	start := time.Now()
	name := FolderPrefix + r.o.RunID
	ref, err := r.vc.CreateLock(ctx, name)
	if err != nil {
		res := r.outcome("unique-name lock", name, start, err, "grant Folder.Create and Folder.Delete on the hatchery's folder")
		res.Needed = r.staticIPs()
		return
	}
	defer func() { _ = r.vc.DeleteLock(context.WithoutCancel(ctx), ref) }()
	_, err = r.vc.CreateLock(ctx, name)
	switch {
	case errors.Is(err, vctypes.ErrLockTaken):
		r.add("unique-name lock", name, start, Pass, "the second create was refused (DuplicateName)")
	case err == nil:
		res := r.add("unique-name lock", name, start, Unsupported, "vCenter accepted a second folder of the same name")
		res.Needed = r.staticIPs()
		res.Fix = "static IPs (iprange, networks) need vCenter's unique folder names: remove them or use DHCP"
	default:
		r.outcome("unique-name lock", name, start, err, "")
	}
}

// staticIPs tells whether the configuration takes addresses through
// locks.
func (r *runner) staticIPs() bool { return vsphere.TopologyRequest(r.cfg).StaticIPs }

// template tries the capabilities of one template: with static IPs an
// address taken as a spawn takes it, a clone into each placement (and its
// datastore's space; the first customized as a spawn's), then on the
// first clone the
// reconfigure's compare-and-swap and its change notification, the power
// cycle, the guestinfo, the bootstrap's guest side and the instant clone.
func (r *runner) template(ctx context.Context, t checkedTemplate) {
	start := time.Now()
	tref, err := r.vc.LoadVirtualMachine(ctx, t.name)
	if err != nil {
		res := r.outcome("template", t.name, start, err, "set "+config.KeyPrefix+"."+t.key+" to a template of this vCenter")
		res.Needed = true
		return
	}
	addr, ok := r.takeAddress(ctx, t)
	if !ok {
		return
	}
	var first *types.ManagedObjectReference
	for i, p := range r.cfg.EffectivePlacements() {
		var use *address
		if first == nil {
			use = &addr // the clone the lifecycle runs on
		}
		vm, ok := r.cloneInto(ctx, t, vcenter.MORef(tref), i, p, use)
		if ok && first == nil {
			first = &vm
		}
	}
	if first == nil {
		return
	}
	r.lifecycle(ctx, t, *first, addr)
}
