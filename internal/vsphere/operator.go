package vsphere

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// What an operator asks of the hatchery through `ctl`
// (internal/daemon/ctl.go, docs/operations.md#ctl): the list of its VMs,
// lifting a quarantine, releasing a debug hold.

// VMInfo is one VM of this hatchery as `ctl vms` shows it.
type VMInfo struct {
	Name string `json:"name"`
	// Phase is the VM's phase (docs/lifecycle.md): in this process's
	// lifecycle table while it works on the VM (cloning, claimed,
	// preparing, running, marked, deleting...), else the one its record
	// implies (idle, started, held, running: no worker start recorded).
	Phase     string     `json:"phase"`
	Job       string     `json:"job,omitempty"`
	Model     string     `json:"model,omitempty"`
	Flavor    string     `json:"flavor,omitempty"`
	WarmPool  bool       `json:"warm_pool"`
	PoweredOn bool       `json:"powered_on"`
	IP        string     `json:"ip,omitempty"`
	Created   time.Time  `json:"created"`
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

// OperatorVMs lists this hatchery's VMs (its model templates aside), by
// name, from the inventory's last snapshot and the lifecycle table.
func (h *HatcheryVSphere) OperatorVMs(ctx context.Context) ([]VMInfo, error) {
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list vms of hatchery %q: %w", h.Name(), err)
	}
	var out []VMInfo
	for _, v := range vms {
		if v.Template || !v.OwnedBy(h.Name()) {
			continue
		}
		a := v.Annotation
		info := VMInfo{
			Name: v.Name, Job: a.JobID, Model: a.ModelName(), Flavor: a.Flavor, WarmPool: a.Provisioning,
			PoweredOn: v.PoweredOn(), IP: a.IPAddress, Created: a.Created, HeldUntil: a.HeldUntil,
		}
		if e, ok := h.life.GetVM(lifeVM(v)); ok {
			info.Phase = e.Phase.String()
			if info.Job == "" {
				info.Job = e.Job
			}
		} else {
			info.Phase = recordPhase(v.Annotation.Provisioning, a.Held(), a.WorkerStarted != nil, a.RegisterOnly)
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// recordPhase is the phase a VM's record implies, for a VM the table holds
// no entry of (its entry left once the inventory showed it, or another
// instance or an earlier run made it).
func recordPhase(pool, held, started, register bool) string {
	switch {
	case held:
		return lifecycle.Held.String()
	case pool:
		return lifecycle.Idle.String()
	case started || register:
		return lifecycle.Started.String()
	}
	return lifecycle.Running.String()
}

// LiftQuarantine ends the quarantine of a template (a V2 model's
// spec.image) or V1 model path at once: its jobs are served again without
// waiting for a probe. name is the template or model path, or the key as
// the status writes it ("template debian12", "model group/name":
// warmpool.Key.QuarantineKey). It logs the lift, with who asked, and
// updates the quarantined_templates gauge; an error names a template not
// quarantined.
func (h *HatcheryVSphere) LiftQuarantine(name, who string) error {
	for _, key := range []string{name, "template " + name, "model " + name} {
		e, ok := h.custody.Quarantine.Lift(key)
		if !ok {
			continue
		}
		h.log.Info("template quarantine lifted", logkey.Detail, e.Key+" lifted by "+who, "failures", e.Failures)
		h.metrics.QuarantinedTemplates(len(h.custody.Quarantine.Quarantined()))
		return nil
	}
	return fmt.Errorf("lift quarantine of %q: not quarantined", name)
}

// ReleaseHold ends the debug hold of a VM (docs/design.md#debug-hold): it
// is marked for deletion and the next cleanup pass destroys it. An error
// names a VM that is not held.
func (h *HatcheryVSphere) ReleaseHold(ctx context.Context, name, who string) error {
	vms, err := h.inv.VMs(ctx)
	if err != nil {
		return fmt.Errorf("release hold of vm %q: %w", name, err)
	}
	for _, v := range h.heldVMs(vms) {
		if v.name != name {
			continue
		}
		if !h.markToDelete(name) {
			return fmt.Errorf("release hold of vm %q: it is being deleted already", name)
		}
		h.log.Info("debug hold released", logkey.VM, name, logkey.Detail, "released by "+who)
		h.inv.Invalidate()
		return nil
	}
	return fmt.Errorf("release hold of vm %q: not held", name)
}
