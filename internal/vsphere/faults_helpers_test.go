//go:build !race

// The vCenter fault tests drive the simulator's FaultInjector, whose rule
// counters govmomi v0.56.0 (pinned) updates without a lock: any two SOAP
// calls at once while a rule is installed are a data race inside the
// simulator, which the race detector reports as a test failure. These
// tests run without the race detector, in their own step of .ci/test.

package vsphere_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// The fault tests inject vCenter faults with the simulator's own
// fault injector (Model.Service.FaultInjector(): the SOAP method answers a
// fault and does nothing) and its per-method request delays, during real
// SpawnWorker, provisioning and cleanup runs, then check the invariants
// with ftCheckInvariants after the next cleanup pass.
//
// The simulator's injector counts matches under a read lock: a rule must
// only match a method the test calls from one goroutine at a time (the
// spawn's clone, power, reconfigure; cleanup's destroy; the inventory
// owner's listing).

const (
	ftHatchery  = "hatch-ft"
	ftOther     = "hatch-other"
	ftIPPrefix  = "10.20.0."
	ftForeignIP = "10.20.0.10" // first address of the range, held by a foreign VM
)

// ftMode is the inventory the hatchery decides from.
type ftMode string

const (
	ftListing ftMode = config.InventoryListing
	ftShared  ftMode = config.InventoryShared
	ftWatch   ftMode = config.InventoryWatch
)

var ftModes = []ftMode{ftListing, ftShared, ftWatch}

// ftAPI is a CDS API knowing the workers the test says registered
// (ftRegister, RemoveV2Worker). The cleanup hands the job of a VM it
// reclaimed before its worker registered back to the queue: the job still
// waits for its worker, held by no one, and the API accepts. Any other
// call panics.
func ftAPI() *cdsclienttest.Fake {
	return &cdsclienttest.Fake{Region: "default", Allow: []string{
		"WorkerList", "V2WorkerList", "WorkerModelsEnabled",
		"QueueJobInfo", "V2QueueJobInfo", "V2Region", "QueueJobRelease", "V2QueueJobRelease",
	}}
}

// ftRegister makes the API list the worker name of the hatchery, building.
func ftRegister(api *cdsclienttest.Fake, name string) {
	api.AddV2Worker(sdk.V2Worker{Name: name, HatcheryName: ftHatchery, Status: sdk.StatusBuilding})
}

// ftOpts shape a rig.
type ftOpts struct {
	mode  ftMode
	env   vcsimtest.Options
	pools []config.WorkerProvisioning
	// beforeClient runs on the simulator before the hatchery's client and
	// inventory exist (nothing of ours calls the simulator yet).
	beforeClient func(*vcsimtest.Env)
	// metrics, when set, is the hatchery's Metrics.
	metrics *metrics.Metrics
	// wrap, when set, wraps the client the hatchery calls (the inventory
	// keeps the plain one).
	wrap func(vcenter.Port) vcenter.Port
}

// ftRig is one simulator, one hatchery and its inventory.
type ftRig struct {
	t       *testing.T
	env     *vcsimtest.Env
	client  *vcenter.Client
	cfg     *config.Config
	h       *vsphere.HatcheryVSphere
	shared  *inventory.Shared // nil in listing mode
	clock   *testutil.Clock
	cds     *cdsclienttest.Fake
	foreign []ftVM
}

func ftStart(t *testing.T, o ftOpts) *ftRig {
	t.Helper()
	env := vcsimtest.Start(t, o.env)
	// Foreign VMs the hatchery must never touch: another hatchery's worker
	// and provisioned VM, and an unannotated VM named like our workers
	// holding the first address of our range.
	other := inventory.Annotation{HatcheryName: ftOther, WorkerName: "foreign-worker", JobID: "x", Created: time.Now().Add(-time.Hour)}
	otherProv := inventory.Annotation{HatcheryName: ftOther, WorkerName: "warmpool-v2-foreign", Provisioning: true, VMwareModelPath: vcsimtest.DefaultTemplate, Created: time.Now().Add(-time.Hour)}
	env.AddVMs([]vcsimtest.ForeignVM{
		{Name: "foreign-worker", Annotation: other.Marshal(), PoweredOn: true, NumCPU: 1, MemoryMB: 1024},
		{Name: "warmpool-v2-foreign", Annotation: otherProv.Marshal(), NumCPU: 2, MemoryMB: 4096},
		{Name: "worker-ft-lookalike", PoweredOn: true, NumCPU: 1, MemoryMB: 1024, IP: ftForeignIP},
	})
	// A roomy resource pool: capacity is not what these tests exercise
	// (vcsim's static runtime has ~1 GB unreserved).
	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
		rt.Memory.UnreservedForVm = 1 << 40
		rt.Cpu.UnreservedForVm = 1 << 20
	})
	if o.beforeClient != nil {
		o.beforeClient(env)
	}
	client := env.Client

	cfg := env.Config()
	cfg.CommonConfiguration.Name = ftHatchery
	cfg.WorkerTTL = 120
	cfg.WorkerRegistrationTTL = 10
	cfg.WorkerProvisioningInterval = 60
	cfg.WorkerProvisioningPoolSize = 2
	cfg.IPRange, cfg.Gateway, cfg.DNS, cfg.SubnetMask = ftForeignIP+"/24", "10.20.0.1", "10.20.0.2", "255.255.255.0"
	cfg.Flavors = []config.Flavor{{Name: "small", CPUs: 1, MemoryMB: 1024}, {Name: "large", CPUs: 4, MemoryMB: 8192}}
	cfg.WorkerProvisioning = o.pools
	cfg.InventoryMode = string(o.mode)
	cfg.InventoryRefreshInterval = 1 // seconds: the release grace is 4 s of the injected clock

	log := testutil.DiscardLogger()
	r := &ftRig{t: t, env: env, client: client, cfg: cfg, clock: testutil.NewClock(time.Now()), cds: ftAPI()}
	var inv inventory.Inventory = inventory.Listing{Client: client}
	if o.mode != ftListing {
		// 250 ms: stale after 1 s, well past a listing under -race with
		// parallel simulators.
		r.shared = inventory.NewShared(client, 250*time.Millisecond, 5*time.Millisecond, log)
		if o.mode == ftWatch {
			r.shared = inventory.NewWatch(client, 250*time.Millisecond, 5*time.Millisecond, log)
		}
		inv = r.shared
		ctx, cancel := context.WithCancel(env.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.shared.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	var hc vcenter.Port = client
	if o.wrap != nil {
		hc = o.wrap(client)
	}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: hc, CDS: r.cds, Inventory: inv, Logger: log, Now: r.clock.Now, Metrics: o.metrics})
	require.NoError(t, err)
	r.h = h
	for _, v := range ftSimVMs(env) {
		if !v.Template {
			r.foreign = append(r.foreign, v)
		}
	}
	require.Len(t, r.foreign, 3)
	return r
}

// ftRule adds a fault injection rule on method: the next max calls (0:
// every call) answer f (nil: a network failure).
func ftRule(env *vcsimtest.Env, method string, max int, f types.BaseMethodFault) {
	env.InjectFault(vcsimtest.Fault{Method: method, Max: max, Err: f, Network: f == nil})
}

// ftVM is a VM's simulator state, read under its lock.
type ftVM struct {
	Ref        types.ManagedObjectReference
	Name       string
	Template   bool
	PowerState types.VirtualMachinePowerState
	Notes      string
	Mirror     string
	CPUs       int32
	MemoryMB   int32
	IPs        []string
	// Annot is the parsed ownership record (Notes, else mirror); nil when none.
	Annot *inventory.Annotation
}

func (v ftVM) ours() bool { return !v.Template && v.Annot != nil && v.Annot.HatcheryName == ftHatchery }

// ftSimVMs reads every VM and template from the simulator's registry (no
// API call: usable during an outage).
func ftSimVMs(env *vcsimtest.Env) []ftVM {
	sctx := env.SimContext()
	var out []ftVM
	for _, o := range env.Model.Map().All("VirtualMachine") {
		vm, ok := o.(*simulator.VirtualMachine)
		if !ok {
			continue
		}
		var v ftVM
		sctx.WithLock(vm, func() {
			v = ftVM{Ref: vm.Self, Name: vm.Name, PowerState: vm.Runtime.PowerState}
			if c := vm.Config; c != nil {
				v.Template, v.Notes = c.Template, c.Annotation
				v.CPUs, v.MemoryMB = c.Hardware.NumCPU, c.Hardware.MemoryMB
				for _, ov := range c.ExtraConfig {
					if x := ov.GetOptionValue(); x != nil && x.Key == inventory.AnnotationMirrorKey {
						v.Mirror, _ = x.Value.(string)
					}
				}
			}
			if g := vm.Guest; g != nil {
				if g.IpAddress != "" {
					v.IPs = append(v.IPs, g.IpAddress)
				}
				for _, n := range g.Net {
					v.IPs = append(v.IPs, n.IpAddress...)
				}
			}
		})
		if a, err := inventory.ParseAnnotation(v.Notes); err == nil {
			v.Annot = a
		} else if a, err := inventory.ParseAnnotation(v.Mirror); err == nil {
			v.Annot = a
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ftFind returns the simulator VM named name.
func ftFind(env *vcsimtest.Env, name string) (ftVM, bool) {
	for _, v := range ftSimVMs(env) {
		if v.Name == name {
			return v, true
		}
	}
	return ftVM{}, false
}

// ftOurs returns the names of our VMs (not templates).
func ftOurs(env *vcsimtest.Env) []string {
	var out []string
	for _, v := range ftSimVMs(env) {
		if v.ours() {
			out = append(out, v.Name)
		}
	}
	return out
}

// ftSync makes the next decision see vCenter as it is now (shared mode:
// waits for a refresh that started after the call; listing: every read is
// fresh).
func (r *ftRig) ftSync() {
	r.t.Helper()
	if r.shared != nil {
		require.NoError(r.t, r.shared.WaitRefresh(r.env.Context()))
	}
}

// ftCleanup runs n awol cleanup passes, each on a fresh view.
func (r *ftRig) ftCleanup(n int) {
	r.t.Helper()
	for i := 0; i < n; i++ {
		r.ftSync()
		r.h.WarmKillAwolServersPass(r.env.Context())
	}
}

// ftModel is the V2 model of the debian12 template.
func ftModel() sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
		Cmd:         "./worker --name={{.Name}}",
	}
}

// ftArgs are the spawn arguments of worker name for job; flavor "" asks none.
func ftArgs(name, job, flavor string) spawn.Arguments {
	wc := spawn.WorkerConfig{Name: name, HatcheryName: ftHatchery, APIEndpoint: "http://api", APIToken: "jwt", RunJobID: job, Model: "m"}
	args := spawn.Arguments{WorkerName: name, JobID: job, HatcheryName: ftHatchery, WorkerConfig: wc, Model: ftModel()}
	if flavor != "" {
		args.Requirements = []sdk.Requirement{{Type: sdk.FlavorRequirement, Value: flavor}}
	}
	return args
}

// ftSpawn does what the framework does for one job: the capacity check
// (which reserves), then SpawnWorker. A worker that started is registered
// on the API, as the real worker would.
func (r *ftRig) ftSpawn(name, job, flavor string) error {
	r.t.Helper()
	args := ftArgs(name, job, flavor)
	ok, err := r.h.CanAllocateResources(r.env.Context(), args.Model, job, args.Requirements)
	require.NoError(r.t, err)
	require.True(r.t, ok, "capacity for job %s", job)
	err = r.h.SpawnWorker(r.env.Context(), args)
	if err == nil {
		ftRegister(r.cds, name)
	}
	return err
}

// ftSpawnFails asserts that a spawn failed naming the steps in want.
func (r *ftRig) ftSpawnFails(name, job, flavor string, want ...string) {
	r.t.Helper()
	err := r.ftSpawn(name, job, flavor)
	require.Error(r.t, err, "spawn of %s must fail", name)
	for _, w := range want {
		assert.Contains(r.t, err.Error(), w, "the error names the step")
	}
	assert.Contains(r.t, err.Error(), name, "the error names the vm")
	assert.Contains(r.t, err.Error(), job, "the error names the job")
}

// ftCheckInvariants checks, after the cleanup pass(es) the test ran:
//   - no VM of ours leaked: each is a running worker with WorkerStarted,
//     or an idle (powered-off) provisioned VM; none is still marked for
//     deletion; names in allowed are let through (the test asserts them);
//   - no IP held by a dead spawn: every reservation belongs to a live VM
//     of ours and the pool's used count is exactly the addresses VMs hold;
//   - capacity back to truth after the release grace (injected clock):
//     nothing in flight, usage equals our powered-on VMs;
//   - the foreign VMs are untouched.
func (r *ftRig) ftCheckInvariants(allowed ...string) {
	t := r.t
	t.Helper()
	ctx := r.env.Context()
	vms := ftSimVMs(r.env)
	held := map[string]bool{}
	var cpus, mem int64
	for _, v := range vms {
		for _, ip := range v.IPs {
			if strings.HasPrefix(ip, ftIPPrefix) {
				held[ip] = true
			}
		}
		if v.Annot != nil && strings.HasPrefix(v.Annot.IPAddress, ftIPPrefix) {
			held[v.Annot.IPAddress] = true
		}
		if !v.ours() {
			continue
		}
		if v.PowerState == types.VirtualMachinePowerStatePoweredOn {
			cpus += int64(v.CPUs)
			mem += int64(v.MemoryMB)
		}
		assert.False(t, r.h.FaultsMarkedToDelete(v.Name), "vm %s still marked for deletion after cleanup", v.Name)
		if slices.Contains(allowed, v.Name) {
			continue
		}
		a := v.Annot
		running := v.PowerState == types.VirtualMachinePowerStatePoweredOn && a.WorkerStarted != nil && !a.Provisioning
		idle := v.PowerState == types.VirtualMachinePowerStatePoweredOff && a.Provisioning && strings.HasPrefix(v.Name, "warmpool-")
		assert.True(t, running || idle, "leaked vm %s: %s, annotation %+v", v.Name, v.PowerState, *a)
	}

	for _, ip := range r.h.FaultsReservedIPs() {
		owner := ""
		for _, v := range vms {
			if v.ours() && v.Annot.IPAddress == ip {
				owner = v.Name
			}
		}
		assert.NotEmpty(t, owner, "ip %s reserved by a dead spawn", ip)
	}
	assert.True(t, held[ftForeignIP], "the foreign vm keeps its ip")

	r.ftSync()
	listed, err := r.client.ListVirtualMachines(ctx)
	require.NoError(t, err)
	var views []inventory.VM
	for _, o := range listed {
		views = append(views, inventory.VMFromInfo(o))
	}
	used, _ := r.h.FaultsIPCounts(views)
	assert.Equal(t, len(held), used, "ip pool: used addresses are exactly those vms hold: %v, reserved %v", held, r.h.FaultsReservedIPs())

	r.clock.Advance(r.h.FaultsReleaseGrace() + time.Second)
	u, err := r.h.CapacityUsage(ctx)
	require.NoError(t, err)
	assert.Zero(t, u.InFlight, "no spawn in flight")
	assert.Equal(t, cpus, u.CPUs, "capacity cpus back to truth")
	assert.Equal(t, mem, u.MemoryMB, "capacity memory back to truth")

	r.ftCheckForeign()
}

// ftCheckForeign asserts the foreign VMs are as they were at start.
func (r *ftRig) ftCheckForeign() {
	r.t.Helper()
	now := map[types.ManagedObjectReference]ftVM{}
	for _, v := range ftSimVMs(r.env) {
		now[v.Ref] = v
	}
	for _, f := range r.foreign {
		got, ok := now[f.Ref]
		if !assert.True(r.t, ok, "foreign vm %s destroyed", f.Name) {
			continue
		}
		assert.Equal(r.t, f.Name, got.Name, "foreign vm renamed")
		assert.Equal(r.t, f.PowerState, got.PowerState, "foreign vm %s power state", f.Name)
		assert.Equal(r.t, f.Notes, got.Notes, "foreign vm %s notes", f.Name)
		assert.Equal(r.t, f.Mirror, got.Mirror, "foreign vm %s mirror", f.Name)
		assert.Equal(r.t, f.CPUs, got.CPUs, "foreign vm %s cpus", f.Name)
	}
}
