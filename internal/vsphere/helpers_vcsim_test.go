package vsphere_test

// Helpers of the simulator integration tests (docs/architecture.md). Names carry a
// "vi" prefix so that they do not collide with other test files.

import (
	"context"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// viClone is one CloneVirtualMachine call seen by viRecordingClient.
type viClone struct {
	Source types.ManagedObjectReference
	Folder types.ManagedObjectReference
	Name   string
	// Req is the request as sent (the adapter builds the specification
	// from it: vim.CloneSpecOf, tested on its own).
	Req vctypes.Clone
	Err error
}

// viRecordingClient is the real adapter with CloneVirtualMachine recorded:
// vcsim does not keep what a clone asked for (linked or full).
type viRecordingClient struct {
	vctypes.Port

	mu     sync.Mutex
	clones []viClone
}

func (c *viRecordingClient) CloneVirtualMachine(ctx context.Context, req vctypes.Clone) (vctypes.Ref, error) {
	ref, err := c.Port.CloneVirtualMachine(ctx, req)
	rec := viClone{Source: vim.MORef(req.Template), Folder: vim.MORef(req.Folder), Name: req.Name, Req: req, Err: err}
	c.mu.Lock()
	c.clones = append(c.clones, rec)
	c.mu.Unlock()
	return ref, err
}

// clone returns the recorded clone named name.
func (c *viRecordingClient) clone(t *testing.T, name string) viClone {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.clones {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no clone of %q recorded", name)
	return viClone{}
}

// viFinder is a finder of the simulator's datacenter on the admin client.
func viFinder(t *testing.T, env *vcsimtest.Env) *find.Finder {
	t.Helper()
	f := find.NewFinder(env.Admin.Client, true)
	dc, err := f.Datacenter(env.Context(), env.Datacenter)
	require.NoError(t, err)
	f.SetDatacenter(dc)
	return f
}

// viPlacement is where a VM lives and its devices, read over the API.
type viPlacement struct {
	Pool       types.ManagedObjectReference
	Datastores []types.ManagedObjectReference
	Devices    object.VirtualDeviceList
}

func viReadPlacement(t *testing.T, env *vcsimtest.Env, ref types.ManagedObjectReference) viPlacement {
	t.Helper()
	var o mo.VirtualMachine
	pc := property.DefaultCollector(env.Admin.Client)
	require.NoError(t, pc.RetrieveOne(env.Context(), ref, []string{"resourcePool", "datastore", "config.hardware.device"}, &o))
	p := viPlacement{Datastores: o.Datastore}
	if o.ResourcePool != nil {
		p.Pool = *o.ResourcePool
	}
	if o.Config != nil {
		p.Devices = object.VirtualDeviceList(o.Config.Hardware.Device)
	}
	return p
}

// viSnapshot is what "untouched" means for a VM that is not ours.
type viSnapshot struct {
	Name       string
	Template   bool
	PowerState types.VirtualMachinePowerState
	Annotation string
	NumCPU     int32
	MemoryMB   int32
}

func viSnap(t *testing.T, env *vcsimtest.Env, name string) viSnapshot {
	t.Helper()
	st := env.MustInspect(name)
	return viSnapshot{Name: st.Name, Template: st.Template, PowerState: st.PowerState, Annotation: st.Annotation, NumCPU: st.NumCPU, MemoryMB: st.MemoryMB}
}

// viStrangers puts a VM that is not a hatchery's and a VM of another
// hatchery (powered on, holding otherIP) in the datacenter and returns
// their names.
func viStrangers(t *testing.T, env *vcsimtest.Env, otherIP string) []string {
	t.Helper()
	other := inventory.Annotation{HatcheryName: "other-hatchery", WorkerName: "other-worker-1", JobID: "run-other", VMwareModelPath: vcsimtest.DefaultTemplate, IPAddress: otherIP}
	env.AddVMs([]vcsimtest.ForeignVM{
		{Name: "foreign-db", Annotation: "production database, do not touch", PoweredOn: true, NumCPU: 4, MemoryMB: 8192, IP: "10.9.0.5"},
		{Name: "other-worker-1", Annotation: other.Marshal(), PoweredOn: true, NumCPU: 2, MemoryMB: 4096, IP: otherIP},
	})
	return []string{"foreign-db", "other-worker-1"}
}

// viLaunch returns the successful /bin/echo call made in vm.
func viLaunch(t *testing.T, env *vcsimtest.Env, vm string) vcsimtest.GuestCall {
	t.Helper()
	for _, c := range env.Guest.CallsFor(vm) {
		if c.ProgramPath == "/bin/echo" && c.Fault == nil {
			return c
		}
	}
	t.Fatalf("no worker launch through /bin/echo recorded in %q", vm)
	return vcsimtest.GuestCall{}
}

// viDecodeConfig decodes the CDS_CONFIG of a launch.
func viDecodeConfig(t *testing.T, c vcsimtest.GuestCall) spawn.WorkerConfig {
	t.Helper()
	require.Len(t, c.EnvVariables, 1)
	enc, ok := strings.CutPrefix(c.EnvVariables[0], "CDS_CONFIG=")
	require.True(t, ok, "CDS_CONFIG in the environment: %v", c.EnvVariables)
	wc, err := spawn.DecodeWorkerConfig(enc)
	require.NoError(t, err)
	return wc
}

// viV2Args is a V2 job's spawn arguments on the default template.
func viV2Args(hatch, worker, job, flavor string) spawn.Arguments {
	wc := spawn.WorkerConfig{Name: worker, HatcheryName: hatch, APIEndpoint: "http://api", APIToken: "jwt", RunJobID: job, Model: "vi-model"}
	return spawn.Arguments{
		WorkerName: worker, JobID: job, HatcheryName: hatch, WorkerConfig: wc,
		Model: sdk.WorkerStarterWorkerModel{
			ModelV2:     &sdk.V2WorkerModel{Name: "vi-model", Type: sdk.VSphere},
			VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
			JobFlavor:   flavor,
			Cmd:         "./worker --name={{.Name}}",
		},
	}
}

// viPowerTracker is a simulator registry handler that follows every power
// transition of the VMs owned by hatch, in the order the simulator applies
// them (inside the power task, under the VM's lock): the vCPUs allocated
// at every moment, their maximum, and how many power-offs happened (to
// validate samples taken concurrently).
type viPowerTracker struct {
	hatch string

	mu       sync.Mutex
	on       map[types.ManagedObjectReference]int32 // powered-on VM → vCPUs
	cpus     int64
	max      int64
	powerOns int
	offs     uint64
	// changed fires after every power transition of ours.
	changed *viSignal
}

func viTrackPower(env *vcsimtest.Env, hatch string) *viPowerTracker {
	p := &viPowerTracker{hatch: hatch, on: map[types.ManagedObjectReference]int32{}, changed: newViSignal()}
	env.Model.Map().AddHandler(p)
	return p
}

func (p *viPowerTracker) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "ViPowerTracker", Value: "power-tracker"}
}

func (p *viPowerTracker) PutObject(*simulator.Context, mo.Reference) {}

func (p *viPowerTracker) RemoveObject(*simulator.Context, types.ManagedObjectReference) {}

func (p *viPowerTracker) UpdateObject(ctx *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	if obj.Reference().Type != "VirtualMachine" {
		return
	}
	var state types.VirtualMachinePowerState
	for _, ch := range changes {
		if ch.Name == "runtime.powerState" {
			state, _ = ch.Val.(types.VirtualMachinePowerState)
		}
	}
	if state == "" {
		return
	}
	vm, ok := ctx.Map.Get(obj.Reference()).(*simulator.VirtualMachine)
	if !ok {
		return
	}
	var cpus int32
	owned := false
	ctx.WithLock(vm, func() {
		if vm.Config == nil {
			return
		}
		cpus = vm.Config.Hardware.NumCPU
		a, err := inventory.AnnotationFromVM(vm.Config.Annotation, vim.OptionsOf(vm.Config.ExtraConfig))
		owned = err == nil && a.HatcheryName == p.hatch && !vm.Config.Template
	})
	if !owned {
		return
	}
	defer p.changed.fire()
	p.mu.Lock()
	defer p.mu.Unlock()
	ref := vm.Self
	if state == types.VirtualMachinePowerStatePoweredOn {
		if _, was := p.on[ref]; !was {
			p.on[ref] = cpus
			p.cpus += int64(cpus)
			p.powerOns++
			p.max = max(p.max, p.cpus)
		}
		return
	}
	if c, was := p.on[ref]; was {
		delete(p.on, ref)
		p.cpus -= int64(c)
		p.offs++
	}
}

func (p *viPowerTracker) stats() (maxCPUs int64, powerOns int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max, p.powerOns
}

func (p *viPowerTracker) powerOffs() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offs
}

// viSampleCPUs sums the vCPUs of hatch's powered-on VMs read from the
// simulator's registry, one VM lock at a time. The sum is not atomic: it is
// valid (a lower bound of what was allocated at the end of the sample) only
// when no VM of ours was powered off while it was taken, which the caller
// checks with the tracker.
func viSampleCPUs(env *vcsimtest.Env, sctx *simulator.Context, hatch string) int64 {
	var sum int64
	for _, o := range env.Model.Map().All("VirtualMachine") {
		vm, ok := o.(*simulator.VirtualMachine)
		if !ok {
			continue
		}
		sctx.WithLock(vm, func() {
			if vm.Config == nil || vm.Config.Template || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				return
			}
			if a, err := inventory.AnnotationFromVM(vm.Config.Annotation, vim.OptionsOf(vm.Config.ExtraConfig)); err == nil && a.HatcheryName == hatch {
				sum += int64(vm.Config.Hardware.NumCPU)
			}
		})
	}
	return sum
}

// viContains tells whether s holds v.
func viContains[T comparable](s []T, v T) bool { return slices.Contains(s, v) }

// customization is the specification's part the request's customization
// becomes in the adapter (vim.CustomizationSpecOf), for the tests that
// read it as vCenter is sent it; no customization: none.
func (c viClone) customization(t *testing.T) types.VirtualMachineCloneSpec {
	t.Helper()
	var s types.VirtualMachineCloneSpec
	if cu := c.Req.Customization; cu != nil {
		spec, err := vim.CustomizationSpecOf(*cu, len(cu.NICs))
		require.NoError(t, err)
		s.Customization = spec
	}
	return s
}
