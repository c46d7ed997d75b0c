package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// foreignObject is a listed VM as vCenter returns it, with raw Notes and
// an optional ExtraConfig mirror.
func foreignObject(name, notes, mirror string, template bool, power vctypes.PowerState) inventory.VM {
	o := mo.VirtualMachine{
		ManagedEntity: mo.ManagedEntity{ExtensibleManagedObject: mo.ExtensibleManagedObject{Self: vim.MORef(warmRef(name))}, Name: name},
		Config:        &types.VirtualMachineConfigInfo{Template: template, Annotation: notes},
		Runtime:       types.VirtualMachineRuntimeInfo{PowerState: types.VirtualMachinePowerState(power)},
	}
	if mirror != "" {
		o.Config.ExtraConfig = []types.BaseOptionValue{&types.OptionValue{Key: inventory.AnnotationMirrorKey, Value: mirror}}
	}
	return inventory.VMFromInfo(vim.VMInfoOf(o))
}

// TestForeignVMsNeverTouched: a datacenter full of VMs and templates that
// are not this hatchery's — no annotation, corrupt or free-text notes,
// another hatchery's records (including provisioned VMs and model
// templates), look-alike names — even when marked for deletion, reported
// disabled or expired by the API, surplus for a pool, or handed to claim,
// prepare or delete directly. The strict mock expects no vCenter call at
// all: no Rename, Reconfigure, Shutdown or Destroy reaches any of them.
func TestForeignVMsNeverTouched(t *testing.T) {
	t.Parallel()
	old := warmNow.Add(-72 * time.Hour)
	on, off := vctypes.PoweredOn, vctypes.PoweredOff
	otherProv := inventory.Annotation{HatcheryName: "hatch-b", WorkerName: "provision-v2-b1", Provisioning: true, VMwareModelPath: "debian12", Created: old}
	otherWorker := inventory.Annotation{HatcheryName: "hatch-b", WorkerName: "worker-b", Created: old, WorkerStarted: &old}
	otherModel := inventory.Annotation{HatcheryName: "hatch-b", Model: true, WorkerModelPath: "grp/m1", Created: old}
	nearlyOurs := inventory.Annotation{HatcheryName: "HATCH-A", WorkerName: "worker-case", Created: old}
	noName := `{"worker_name":"worker-anon","provisioning":true,"vmware_model_path":"debian12"}`

	vms := []inventory.VM{
		foreignObject("debian12", "", "", true, off),
		foreignObject("ops-db", "", "", false, on),
		foreignObject("provision-v2-lookalike", "", "", false, off),
		foreignObject("provision-v2-freetext", "built by the ops team", "", false, off),
		foreignObject("provision-v2-corrupt", `{"hatchery_name":"hatch-a","provisioning":tru`, "", false, off),
		foreignObject("provision-v2-noname", noName, "", false, off),
		foreignObject("provision-v2-b1", otherProv.Marshal(), "", false, off),
		foreignObject("provision-v2-b2", "", otherProv.Marshal(), false, on),
		foreignObject("worker-b", otherWorker.Marshal(), "", false, on),
		foreignObject("worker-b-done", otherWorker.Marshal(), "", false, off),
		foreignObject("m1", otherModel.Marshal(), "", true, off),
		foreignObject("worker-case", nearlyOurs.Marshal(), "", false, on),
		foreignObject("register-m1-b", `{"hatchery_name":"hatch-b","register_only":true}`, "", false, off),
		// Corrupt Notes whose mirror names another hatchery: still not ours.
		foreignObject("worker-mirror-b", "edited by hand", otherWorker.Marshal(), false, on),
	}
	for _, v := range vms {
		require.False(t, v.OwnedBy(warmHatcheryName), "%s must not be ours", v.Name)
	}

	var v1 []sdk.Worker
	var v2 []sdk.V2Worker
	for _, v := range vms {
		v1 = append(v1, sdk.Worker{Name: v.Name, Status: sdk.StatusDisabled})
		v2 = append(v2, sdk.V2Worker{Name: v.Name, Status: sdk.StatusDisabled})
	}
	cds := &cdsclienttest.Fake{V1Workers: v1, V2Workers: v2, Models: []sdk.Model{{Name: "m1", Group: &sdk.Group{Name: "grp"}}}}
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 0}, {ModelPath: "grp/m1", Number: 0}}
	e := newWarmEnv(t, cfg, vms, cds)
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)
	ctx := context.Background()

	// Whatever the caches say, the records decide.
	for _, v := range vms {
		e.h.markToDelete(v.Name)
	}
	e.h.killDisabledWorkers(ctx)
	e.h.killAwolServers(ctx)
	e.h.pool.Provision(ctx)
	e.h.killAwolServers(ctx)

	for _, m := range []sdk.WorkerStarterWorkerModel{v2Model("debian12"), v1Model("grp", "m1")} {
		got, err := e.h.pool.Claim(ctx, m, nil, true)
		require.NoError(t, err)
		assert.Nil(t, got)
	}
	for _, v := range vms {
		require.Error(t, e.h.deleteServer(ctx, v, custody.StopRunning), v.Name)
		_, err := e.h.pool.PrepareClaimed(ctx, &v, inventory.Annotation{WorkerName: "worker-x"}, nil, nil)
		require.Error(t, err, v.Name)
	}
	assert.Empty(t, rec.calls)
}

// TestOwnTemplatesNeverDestroyed: even marked for deletion, this
// hatchery's templates stay (cleanup skips them; deleteServer refuses a
// template that is not a model template).
func TestOwnTemplatesNeverDestroyed(t *testing.T) {
	t.Parallel()
	tpl := warmVM("our-tpl", wOff, wTemplate)
	e := newWarmEnv(t, warmConfig(), []inventory.VM{tpl}, &cdsclienttest.Fake{})
	e.h.markToDelete("our-tpl")
	e.h.killAwolServers(context.Background())
	require.Error(t, e.h.deleteServer(context.Background(), tpl, custody.StopRunning))
	assert.True(t, isMarked(e.h, "our-tpl"))
}
