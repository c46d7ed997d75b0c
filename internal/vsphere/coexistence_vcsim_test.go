package vsphere_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// upstreamTakes is the upstream CDS vSphere hatchery's rule for taking a
// VM as a ready VM of its own warm pool, written from what it does
// (docs/coexistence.md): the VM's name starts with "provision-v2", its
// Notes decode as a JSON object (keys matched without regard to case, as
// Go's decoder does) whose "provisioning" is true, and whose
// "vmware_model_path" is the template a job's model names; and the VM is
// powered off. It does not read the hatchery the record names. It
// returns the template the VM would be taken for. recordOnly drops the
// power state from the rule: a VM it matches would be taken as soon as it
// is powered off, in whatever phase.
func upstreamTakes(name, notes string, power types.VirtualMachinePowerState, recordOnly bool) (string, bool) {
	if !strings.HasPrefix(name, "provision-v2") || notes == "" {
		return "", false
	}
	var rec struct {
		Provisioning    bool   `json:"provisioning"`
		VMwareModelPath string `json:"vmware_model_path"`
	}
	if json.Unmarshal([]byte(notes), &rec) != nil || !rec.Provisioning || rec.VMwareModelPath == "" {
		return "", false
	}
	if !recordOnly && power != types.VirtualMachinePowerStatePoweredOff {
		return "", false
	}
	return rec.VMwareModelPath, true
}

// rawVM is a VM as vCenter lists it: name, Notes, power state.
type rawVM struct {
	ref      string
	name     string
	notes    string
	power    types.VirtualMachinePowerState
	template bool
}

func rawVMs(t *testing.T, env *vcsimtest.Env) []rawVM {
	t.Helper()
	objs, err := env.Client.ListVirtualMachines(env.Context())
	require.NoError(t, err)
	out := make([]rawVM, 0, len(objs))
	for _, o := range objs {
		out = append(out, rawVM{ref: o.Ref.Value, name: o.Name, power: types.VirtualMachinePowerState(o.PowerState), notes: o.Notes, template: o.Template})
	}
	return out
}

// coexistSpawn is a spawn of a worker named name on template image.
func coexistSpawn(name, job, image string) spawn.Arguments {
	a := hotSpawnArgs(name, job)
	a.Model.VSphereSpec.Image = image
	return a
}

// legacyRecord is rec as earlier versions of this hatchery wrote it: the
// pool flag under the key "provisioning", the one upstream reads.
func legacyRecord(t *testing.T, rec inventory.Annotation) string {
	t.Helper()
	s := rec.Marshal()
	require.Contains(t, s, `"warm_pool":`)
	return strings.Replace(s, `"warm_pool":`, `"provisioning":`, 1)
}

// TestVcsimUpstreamCannotClaimOurPool: upstream's pool rule
// (upstreamTakes) matches no VM of ours in any phase vCenter shows — a
// powered-off and a suspended pool being provisioned, idle, claimed,
// renamed, running — sampled all along, by its record alone (any power
// state) too. With the earlier names (provision-v2-) and record key
// (provisioning), every idle pool VM of ours matched it; the test checks
// that such VMs, made as an earlier version made them, do match
// (the rule is not vacuous).
func TestVcsimUpstreamCannotClaimOurPool(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := warmVcsimConfig(env,
		config.WorkerProvisioning{ModelVMWare: "debian12", Number: 2},
		config.WorkerProvisioning{ModelVMWare: "ubuntu", Number: 1, Flavor: "large", IdleState: config.IdleStateSuspended},
	)
	cfg.DefaultFlavor = "large"
	ctx := env.Context()
	h, inv := hotVcsimHatchery(t, env, cfg)

	var mu sync.Mutex
	var matched []string
	samples, ours := 0, 0
	sample := func() {
		for _, v := range rawVMs(t, env) {
			a, err := inventory.ParseAnnotation(v.notes)
			if v.template || err != nil || a.HatcheryName != warmVcsimHatchery {
				continue
			}
			mu.Lock()
			ours++
			if tpl, ok := upstreamTakes(v.name, v.notes, v.power, true); ok {
				matched = append(matched, v.name+" ("+string(v.power)+") for "+tpl)
			}
			mu.Unlock()
		}
		mu.Lock()
		samples++
		mu.Unlock()
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
				sample()
			}
		}
	}()

	h.WarmProvisioningPass(ctx)
	env.WaitInventory(inv)
	vms := warmVcsimVMs(t, env)
	require.Len(t, warmPool(vms, "debian12"), 2)
	require.Len(t, warmPool(vms, "ubuntu"), 1)
	require.NoError(t, h.SpawnWorker(ctx, coexistSpawn("worker-cold", "job-1", "debian12")))
	require.NoError(t, h.SpawnWorker(ctx, coexistSpawn("worker-hot", "job-2", "ubuntu")))
	env.WaitInventory(inv)
	h.WarmProvisioningPass(ctx) // the refill
	close(stop)
	<-sampled
	sample() // the end state

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, matched, "vms of ours upstream would take")
	assert.Greater(t, samples, 2)
	assert.Positive(t, ours)
	for _, v := range rawVMs(t, env) {
		if !v.template {
			_, ok := upstreamTakes(v.name, v.notes, types.VirtualMachinePowerStatePoweredOff, false)
			assert.False(t, ok, "%s: upstream would take it once powered off", v.name)
		}
	}
	assert.True(t, launched(env, "worker-cold"))
	assert.True(t, launched(env, "worker-hot"))

	// The rule is not vacuous: an idle pool VM as an earlier version
	// named and recorded it is one upstream takes.
	idle := warmPool(warmVcsimVMs(t, env), "debian12")[0]
	tpl, ok := upstreamTakes("provision-v2-debian12-1f0c3a-0", legacyRecord(t, *idle.Annotation), types.VirtualMachinePowerStatePoweredOff, false)
	assert.True(t, ok)
	assert.Equal(t, "debian12", tpl)
}

// TestVcsimOldPoolVMsAdoptedOrRetired: VMs of the warm pool made by an
// earlier version of this hatchery (named provision-v2-…, the pool flag
// recorded as "provisioning", which upstream's rule matches) are still
// this hatchery's: not counted as started workers, claimed by a spawn
// (and then recorded in the new form), and the idle one left is removed
// by the next provisioning pass, which refills the pool under the new
// names. An upstream hatchery's provision-v2- VM, and one whose record
// names no hatchery, are never touched.
func TestVcsimOldPoolVMsAdoptedOrRetired(t *testing.T) {
	env := warmVcsimEnv(t)
	cfg := warmVcsimConfig(env, config.WorkerProvisioning{ModelVMWare: "debian12", Number: 2})
	cfg.DefaultFlavor = "small"
	ctx := env.Context()
	h1, inv1 := hotVcsimHatchery(t, env, cfg)
	h1.WarmProvisioningPass(ctx)
	env.WaitInventory(inv1)
	made := warmPool(warmVcsimVMs(t, env), "debian12")
	require.Len(t, made, 2)

	// As an earlier version left them: its names, its record.
	oldNames := []string{"provision-v2-8k2m4x", "provision-v2-debian12-1f0c3a-1"} // random, then slot names
	for i, v := range made {
		old := legacyRecord(t, *v.Annotation)
		spec := types.VirtualMachineConfigSpec{Name: oldNames[i], Annotation: old,
			ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: inventory.AnnotationMirrorKey, Value: old}}}
		require.NoError(t, env.Client.ReconfigureVirtualMachine(ctx, vcenter.MORef(v.Ref), spec))
	}
	upstreamNotes := `{"hatchery_name":"upstream-vsphere","worker_name":"provision-v2-up","provisioning":true,"vmware_model_path":"debian12","created":"2026-01-01T00:00:00Z"}`
	unownedNotes := `{"worker_name":"provision-v2-anon","provisioning":true,"vmware_model_path":"debian12"}`
	env.AddVMs([]vcsimtest.ForeignVM{
		{Name: "provision-v2-up", Annotation: upstreamNotes, NumCPU: 2, MemoryMB: 4096},
		{Name: "provision-v2-anon", Annotation: unownedNotes, NumCPU: 2, MemoryMB: 4096},
	})
	foreign := map[string]rawVM{}
	for _, v := range rawVMs(t, env) {
		if v.name == "provision-v2-up" || v.name == "provision-v2-anon" {
			foreign[v.name] = v
		}
		if strings.HasPrefix(v.name, "provision-v2-") {
			_, ok := upstreamTakes(v.name, v.notes, v.power, false)
			assert.True(t, ok, "%s: upstream takes it (as it took ours)", v.name)
		}
	}
	require.Len(t, foreign, 2)

	// The new version starts on them.
	h2, inv2 := hotVcsimHatchery(t, env, cfg)
	env.WaitInventory(inv2)
	started, err := h2.WorkersStarted(ctx)
	require.NoError(t, err)
	assert.Empty(t, started, "old pool vms are pool vms, not workers")

	// A spawn adopts the oldest (its record's Created, then its name).
	require.NoError(t, h2.SpawnWorker(ctx, coexistSpawn("worker-adopt", "job-1", "debian12")))
	w := env.MustInspect("worker-adopt")
	assert.Contains(t, []string{made[0].Ref.Value, made[1].Ref.Value}, w.Ref.Value, "an old pool vm became the worker")
	assert.NotContains(t, w.ExtraConfig[inventory.AnnotationMirrorKey], `"provisioning"`, "the record is rewritten in the new form")
	assert.True(t, launched(env, "worker-adopt"))

	// The next pass removes the other, idle, and refills under the new names.
	env.WaitInventory(inv2)
	h2.WarmProvisioningPass(ctx)
	env.WaitInventory(inv2)
	h2.WarmKillAwolServersPass(ctx)
	env.WaitInventory(inv2)

	names := map[string]bool{}
	for _, v := range rawVMs(t, env) {
		names[v.name] = true
		if f, ok := foreign[v.name]; ok {
			assert.Equal(t, f, v, "%s untouched", v.name)
		}
		if !v.template && !strings.HasPrefix(v.name, "provision-v2-up") && !strings.HasPrefix(v.name, "provision-v2-anon") {
			_, ok := upstreamTakes(v.name, v.notes, types.VirtualMachinePowerStatePoweredOff, false)
			assert.False(t, ok, "%s: upstream would take it", v.name)
		}
	}
	for _, n := range oldNames {
		if names[n] {
			assert.Fail(t, "old idle pool vm left", n)
		}
	}
	assert.True(t, names["provision-v2-up"] && names["provision-v2-anon"], "foreign vms still there: %v", names)
	assert.Len(t, warmPool(warmVcsimVMs(t, env), "debian12"), 2, "the pool refilled under the new names")
	assert.True(t, names["worker-adopt"])
}
