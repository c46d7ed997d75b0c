package warmpool

import (
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// Name prefixes of the pool's VMs. They are not the upstream CDS vSphere
// hatchery's: it takes any powered-off VM whose name starts with
// "provision-v2" and whose record is flagged for its template as a VM of
// its own pool, whatever hatchery the record names
// (docs/coexistence.md).
const (
	// v1Prefix starts the name of a pool VM of a V1 model.
	v1Prefix = "warmpool-v1-"
	// v2Prefix starts the name of a pool VM of a V2 model (a template).
	v2Prefix = "warmpool-v2-"
	// Prefix starts the name of every pool VM.
	Prefix = "warmpool-"
)

// Name prefixes of the pool VMs of earlier versions of this hatchery,
// which upstream hatcheries claim. Such a VM, with this hatchery's
// record, is still a VM of its pool: claimed like any other while it
// waits, never counted toward its pool's number, and removed when idle
// (RemoveSurplus) so that its slot is refilled under the new prefix.
const (
	legacyV1Prefix = "provision-v1-"
	legacyV2Prefix = "provision-v2-"
	// LegacyPrefix starts the name of every pool VM of an earlier
	// version.
	LegacyPrefix = "provision-"
)

// HasPoolName tells whether vm bears the name of a pool VM, of this
// version (Prefix) or of an earlier one (LegacyPrefix). Whether it is a
// pool VM of this hatchery is its record's to say (its owner and pool
// flag).
func HasPoolName(vm inventory.VM) bool {
	return vm.HasPrefix(Prefix) || vm.HasPrefix(LegacyPrefix)
}

// legacy tells whether vm bears the pool name of an earlier version.
func legacy(vm inventory.VM) bool {
	return vm.HasPrefix(legacyV1Prefix) || vm.HasPrefix(legacyV2Prefix)
}

// Key identifies one warm pool: V1 or V2, the model (V2 template name or
// V1 model path) and the flavor name the VMs are pre-sized for ("" =
// neutral). Flavor names are lower-case.
type Key struct {
	// V1 is true for a pool of a V1 model.
	V1 bool
	// Model is the V2 template name or the V1 model path.
	Model string
	// Flavor is the lower-case flavor name, "" for neutral VMs.
	Flavor string
}

// keyOf returns the pool a provisioned VM belongs to, false when the VM is
// not a provisioned VM of hatchery (its record names hatchery and flags it
// as a pool VM, under a pool name of this version or an earlier one).
func keyOf(hatchery string, vm inventory.VM) (Key, bool) {
	if vm.Template || !vm.OwnedBy(hatchery) || !vm.Annotation.Provisioning {
		return Key{}, false
	}
	flavor := config.FlavorName(vm.Annotation.Flavor) // a record, maybe written by hand
	switch {
	case vm.HasPrefix(v2Prefix), vm.HasPrefix(legacyV2Prefix):
		return Key{Model: vm.Annotation.VMwareModelPath, Flavor: flavor}, true
	case vm.HasPrefix(v1Prefix), vm.HasPrefix(legacyV1Prefix):
		return Key{V1: true, Model: vm.Annotation.WorkerModelPath, Flavor: flavor}, true
	}
	return Key{}, false
}

func (k Key) prefix() string {
	if k.V1 {
		return v1Prefix
	}
	return v2Prefix
}

// Pool is k as the lifecycle table records it.
func (k Key) Pool() lifecycle.Pool {
	return lifecycle.Pool{V1: k.V1, Model: k.Model, Flavor: k.Flavor}
}

// keyOfPool is the pool key of a lifecycle entry's pool.
func keyOfPool(p lifecycle.Pool) Key {
	return Key{V1: p.V1, Model: p.Model, Flavor: p.Flavor}
}

// ModelKey is the pool of model's workers, flavor aside: a V1 model's
// path (the model as the configuration names it), else the V2 model's
// template (modelref.Of: spec.image, "" when it names none). A claim
// looks for a VM of this pool; a spawn's quarantine key is its
// QuarantineKey. The template a pool's VMs are cloned from is
// modelref's (provisioningTargets), for V1 as for V2.
func ModelKey(model sdk.WorkerStarterWorkerModel) Key {
	k := modelref.KeyOf(model)
	return Key{V1: k.V1, Model: k.Model}
}

// QuarantineKey is the quarantine key of the pool's template, which the
// spawns of the same V2 template or V1 model use too (ModelKey): spawns
// and provisionings share one record.
func (k Key) QuarantineKey() string {
	return modelref.Key{V1: k.V1, Model: k.Model}.QuarantineKey()
}

func keyLess(a, b Key) bool {
	if a.V1 != b.V1 {
		return !a.V1
	}
	if a.Model != b.Model {
		return a.Model < b.Model
	}
	return a.Flavor < b.Flavor
}

// IdlePowerState is the power state a ready pool VM whose record is a
// waits in: its idle state (docs/configuration.md, "Warm pool"); powered
// off when none is recorded.
func IdlePowerState(a *inventory.Annotation) vctypes.PowerState {
	if a == nil {
		return vctypes.PoweredOff
	}
	switch a.IdleState {
	case config.IdleStateSuspended:
		return vctypes.Suspended
	case config.IdleStatePoweredOn:
		return vctypes.PoweredOn
	}
	return vctypes.PoweredOff
}
