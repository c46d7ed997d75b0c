package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// The provisioning's tests: one pool VM made (ProvisionOne) and a pass
// (Provision) on a fake of the pool's and the custody's ports in the
// project's vocabulary, which records every call; the clone is the
// test's. The rules are docs/design.md#provisioned-vms and
// docs/flavors-and-capacity.md, "Warm pools and flavors".

// vmPort is the pool's Port and the custody's: it records each call as
// "verb name" (the VM named by its testutil.VMRef) and answers each verb
// with the next error queued for it (nil when none is left), in the
// fixture kit's CallLog, and every IP wait with provisionIP.
type vmPort struct {
	testutil.CallLog
	mu      sync.Mutex
	records []inventory.Annotation
	// unbounded counts the waits called without a deadline.
	unbounded int
}

const provisionIP = "10.0.0.9"

func (f *vmPort) call(ctx context.Context, verb string, vm vctypes.Ref) error {
	if _, ok := ctx.Deadline(); !ok && strings.HasPrefix(verb, "wait") {
		f.mu.Lock()
		f.unbounded++
		f.mu.Unlock()
	}
	return f.Call(verb, strings.TrimPrefix(vm.Value, "vm-"))
}

func (f *vmPort) StartVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return f.call(ctx, "start", vm)
}

func (f *vmPort) ShutdownVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return f.call(ctx, "shutdown", vm)
}

func (f *vmPort) SuspendVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return f.call(ctx, "suspend", vm)
}

func (f *vmPort) DestroyVirtualMachine(ctx context.Context, vm vctypes.Ref) error {
	return f.call(ctx, "destroy", vm)
}

// ReconfigureVirtualMachine records the custody's record write (a change
// of the record alone) as "record", its userdata scrub (the scrub's
// options alone) as "scrub", any other change (a claim's) as
// "reconfigure".
func (f *vmPort) ReconfigureVirtualMachine(ctx context.Context, vm vctypes.Ref, change vctypes.ConfigChange) error {
	switch {
	case change.Record != nil && change.Name == "" && change.ChangeVersion == "" && change.Growth == nil && change.Options == nil:
		annot, err := inventory.ParseAnnotation(change.Record.Notes)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.records = append(f.records, *annot)
		f.mu.Unlock()
		return f.call(ctx, "record", vm)
	case reflect.DeepEqual(change, vctypes.ConfigChange{Options: cloudinit.ScrubOptions()}):
		return f.call(ctx, "scrub", vm)
	}
	return f.call(ctx, "reconfigure", vm)
}

func (f *vmPort) WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error {
	return f.call(ctx, "wait-guest", vm)
}

func (f *vmPort) WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, _ string) (string, error) {
	if err := f.call(ctx, "wait-ip", vm); err != nil {
		return "", err
	}
	return provisionIP, nil
}

// cloned is one call of the test's clone.
type cloned struct {
	template string
	name     string
	annot    inventory.Annotation
	flavor   string
}

// provEnv is a Pool on a vmPort and what a test reads of it.
type provEnv struct {
	p     *Pool
	port  *vmPort
	inv   *inventorytest.Fixed
	state *admission.State
	clock *testutil.Clock
	log   *testutil.SyncBuffer

	mu       sync.Mutex
	clones   []cloned
	cloneErr func(name string) error
}

// newProvEnv builds a pool of testutil.Hatchery on cfg (nil: no static
// limit, the flavors small and large, the listing inventory) and the VMs
// vms. Its admission keeps one state across calls, as the hatchery's.
func newProvEnv(t *testing.T, cfg *config.Config, vms ...inventory.VM) *provEnv {
	t.Helper()
	if cfg == nil {
		cfg = provConfig()
	}
	e := &provEnv{port: &vmPort{}, inv: inventorytest.New(vms...), state: admission.NewState(),
		clock: testutil.NewClock(testutil.Epoch), log: &testutil.SyncBuffer{}}
	log := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	life := lifecycle.New(e.clock.Now)
	ips, err := ippool.New(cfg)
	require.NoError(t, err)
	cust := &custody.Custody{Hatchery: testutil.Hatchery, Port: e.port, Inventory: e.inv, Life: life, IPs: ips,
		Quarantine: quarantine.New(quarantine.Policy{Threshold: 2, BackoffBase: time.Minute, BackoffMax: time.Hour}, e.clock.Now), Log: log}
	e.p = &Pool{
		Hatchery: testutil.Hatchery, Config: cfg, Port: e.port, Inventory: e.inv, Life: life, Custody: cust, IPs: ips,
		Admission: func() admission.Admission {
			return admission.Admission{State: e.state, Hatchery: testutil.Hatchery, Config: cfg, Inventory: e.inv,
				Port: roomyPool{}, Log: log, Now: e.clock.Now}
		},
		Clone: e.clone,
		Host:  registered{},
		Log:   log,
		Now:   e.clock.Now,
	}
	t.Cleanup(func() {
		if bugs := life.Bugs(); len(bugs) > 0 {
			t.Errorf("lifecycle moves refused: %v", bugs)
		}
	})
	return e
}

// provConfig is a configuration without static limit, with the flavors
// small and large and the listing inventory (no release grace).
func provConfig() *config.Config {
	return &config.Config{
		CommonConfiguration:        hatchery.CommonConfiguration{Name: testutil.Hatchery},
		Flavors:                    []config.Flavor{{Name: "small", CPUs: 1, MemoryMB: 1024}, {Name: "large", CPUs: 4, MemoryMB: 8192}},
		InventoryMode:              config.InventoryListing,
		WorkerProvisioningPoolSize: 1,
	}
}

// clone is the pool's CloneFunc: it records the call and answers
// cloneErr's error, else the VM's testutil.VMRef.
func (e *provEnv) clone(_ context.Context, template modelref.Template, name string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := cloned{template: template.Name, name: name, annot: *annot}
	if flavor != nil {
		c.flavor = flavor.Name
	}
	e.clones = append(e.clones, c)
	if e.cloneErr != nil {
		if err := e.cloneErr(name); err != nil {
			return vctypes.Ref{}, err
		}
	}
	return testutil.VMRef(name), nil
}

func (e *provEnv) cloneList() []cloned {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.clones)
}

// admission is the pool's admission.
func (e *provEnv) admission() admission.Admission { return e.p.Admission() }

// counted is what the admission counts of the provisionings now: vCPUs
// reserved or still within their release grace.
func (e *provEnv) counted(t *testing.T) int64 {
	t.Helper()
	u, err := e.admission().Usage(context.Background())
	require.NoError(t, err)
	return u.CPUs
}

// roomyPool is the admission's resource pool: readable, with room for
// anything (a provisioning does not read it; the usage reports do).
type roomyPool struct{}

func (roomyPool) LoadResourcePool(context.Context) (vctypes.Ref, error) {
	return vctypes.Ref{Type: "ResourcePool", Value: "resgroup-1"}, nil
}

func (roomyPool) ResourcePoolRuntime(context.Context, vctypes.Ref) (*vctypes.PoolRuntime, error) {
	return &vctypes.PoolRuntime{MemoryUnreservedBytes: 1 << 50, CPUUnreservedMHz: 1 << 30}, nil
}

// registered is a Host whose V1 models need no registration.
type registered struct{}

func (registered) NeedRegistration(context.Context, *sdk.Model) bool { return false }

// v2Task is the task of slot 1 of the V2 pool of template debian12,
// pre-sized for flavor ("": neutral).
func v2Task(e *provEnv, flavor string) Task {
	k := Key{Model: "debian12", Flavor: flavor}
	t := Task{Key: k, Name: k.SlotName(1), Template: modelref.OfEntry("", "debian12")}
	if flavor != "" {
		t.Flavor = e.p.FlavorByName(flavor)
	}
	return t
}

// TestProvisionOneMakesAnIdleVM: a pool VM is cloned with its record
// (ours, its slot's name, provisioning, created now, its flavor and model),
// waits for its IP within a bound, is powered off and is then idle: its
// reservation ends at once, nothing is marked.
func TestProvisionOneMakesAnIdleVM(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		task   func(e *provEnv) Task
		annot  func(name string) inventory.Annotation
		flavor string
	}{
		{"v2 neutral", func(e *provEnv) Task { return v2Task(e, "") }, func(name string) inventory.Annotation {
			return inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: name, Provisioning: true, Created: testutil.Epoch, VMwareModelPath: "debian12"}
		}, ""},
		{"v2 pre-sized", func(e *provEnv) Task { return v2Task(e, "large") }, func(name string) inventory.Annotation {
			return inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: name, Provisioning: true, Created: testutil.Epoch, VMwareModelPath: "debian12", Flavor: "large"}
		}, "large"},
		{"v1", func(*provEnv) Task {
			k := Key{V1: true, Model: "grp/m1"}
			return Task{Key: k, Name: k.SlotName(1), Template: modelref.Template{Name: "grp-m1", Built: true}, LastModified: "1700000000"}
		}, func(name string) inventory.Annotation {
			return inventory.Annotation{HatcheryName: testutil.Hatchery, WorkerName: name, Provisioning: true, Created: testutil.Epoch,
				WorkerModelPath: "grp/m1", WorkerModelLastModified: "1700000000"}
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := provConfig()
			cfg.MaxCPUs = 100 // a static limit: the provisioning reserves
			e := newProvEnv(t, cfg, tplVM("debian12", 2), tplVM("grp-m1", 2))
			task := tc.task(e)
			e.p.ProvisionOne(context.Background(), task)

			clones := e.cloneList()
			require.Len(t, clones, 1)
			assert.Equal(t, task.Template.Name, clones[0].template)
			assert.Equal(t, task.Name, clones[0].name)
			assert.Equal(t, tc.annot(task.Name), clones[0].annot)
			assert.Equal(t, tc.flavor, clones[0].flavor)
			assert.Equal(t, []string{"wait-ip " + task.Name, "shutdown " + task.Name}, e.port.List())
			assert.Zero(t, e.port.unbounded, "the ip wait is bounded")
			assert.Equal(t, lifecycle.Gone, e.p.Life.Phase(task.Name), "listing inventory: the next listing shows it")
			assert.Zero(t, e.counted(t), "powered off: its reservation ended")
			assert.Positive(t, e.inv.Invalidations())
			assert.Contains(t, e.log.String(), `msg="provisioned vm ready"`)
			assert.Contains(t, e.log.String(), `detail="cloned, got its ip, powered off"`)
			assert.NotContains(t, e.log.String(), "level=WARN")
		})
	}
}

// TestProvisionOneIdleUntilShown: with a shared inventory the ready VM is
// Idle until a snapshot shows it (it counts in its pool meanwhile) for
// the release grace at most.
func TestProvisionOneIdleUntilShown(t *testing.T) {
	t.Parallel()
	cfg := provConfig()
	cfg.InventoryMode, cfg.InventoryRefreshInterval = config.InventoryShared, 30
	e := newProvEnv(t, cfg, tplVM("debian12", 2))
	task := v2Task(e, "")
	e.p.ProvisionOne(context.Background(), task)
	entry, ok := e.p.Life.Get(task.Name)
	require.True(t, ok)
	assert.Equal(t, lifecycle.Idle, entry.Phase)
	assert.Equal(t, "vm-"+task.Name, entry.Ref)
	assert.Equal(t, map[Key]int{task.Key: 1}, e.p.Counts(nil), "counted in its pool though no snapshot shows it")
	e.clock.Advance(2*time.Minute + time.Second)
	assert.Empty(t, e.p.Counts(nil), "past the release grace: no longer counted")
}

// TestProvisionOneDeferred: a provisioning that cannot start now leaves
// no VM, no mark and no reservation, and the slot is tried again next
// pass: no room (static limits), the slot busy, the template quarantined,
// no free IP address, the name taken by another instance.
func TestProvisionOneDeferred(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    func(c *config.Config)
		setup  func(e *provEnv, task Task)
		clones int
		line   string
		phase  lifecycle.Phase // the slot's phase after
		warn   bool            // the line is a WARN
	}{
		{name: "no room", cfg: func(c *config.Config) { c.MaxCPUs = 3 },
			line: `detail="capacity: maxCpus reached"`, phase: lifecycle.Gone},
		{name: "slot busy", setup: func(e *provEnv, task Task) {
			require.NoError(t, e.p.Life.Move(task.Name, lifecycle.Gone, lifecycle.Provisioning, lifecycle.WithPool(task.Key.Pool())))
		}, line: "provisioning deferred to the next pass", phase: lifecycle.Provisioning, warn: true},
		{name: "quarantined", setup: func(e *provEnv, task Task) {
			for range 2 {
				a, _, refused := e.p.Custody.BeginAttempt(task.Key.QuarantineKey())
				require.Nil(t, refused)
				a.End(false, quarantine.CauseTemplate, "boom")
			}
		}, line: "reason=quarantined", phase: lifecycle.Gone},
		{name: "no free address", setup: func(e *provEnv, _ Task) {
			e.cloneErr = func(string) error { return fmt.Errorf("allocate ip: %w", ippool.ErrNoIPAvailable) }
		}, clones: 1, line: "reason=ip", phase: lifecycle.Gone},
		{name: "slot taken by another instance", setup: func(e *provEnv, _ Task) {
			e.cloneErr = func(string) error {
				return &vctypes.Fault{Kind: vctypes.FaultDuplicateName, Err: errors.New("name taken")}
			}
		}, clones: 1, line: `msg="pool slot filled by another instance"`, phase: lifecycle.Gone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := provConfig()
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			e := newProvEnv(t, cfg, tplVM("debian12", 2))
			task := v2Task(e, "large")
			if tc.setup != nil {
				tc.setup(e, task)
			}
			e.p.ProvisionOne(context.Background(), task)
			assert.Len(t, e.cloneList(), tc.clones)
			assert.Empty(t, e.port.List(), "nothing done to a vm")
			assert.Equal(t, tc.phase, e.p.Life.Phase(task.Name))
			assert.False(t, e.p.Life.In(task.Name, lifecycle.Marked), "nothing marked")
			assert.Zero(t, e.counted(t), "no reservation left")
			lines := e.log.Lines(tc.line)
			require.Len(t, lines, 1, e.log.String())
			assert.Equal(t, tc.warn, strings.Contains(lines[0], "level=WARN"), lines[0])
			_, _, refused := e.p.Custody.BeginAttempt(task.Key.QuarantineKey())
			assert.Equal(t, tc.name == "quarantined", refused != nil, "neither counts against the template")
		})
	}
}

// TestProvisionOneFailureMarked: a VM that fails to clone or once cloned
// (its IP, its power-off, a hot pool's guest, record or suspend) is marked for
// deletion, logged once as a WARN (INFO when the shutdown cut it), and its
// reservation is released, not dropped: it may still run until the
// cleanup destroys it, so it counts for the release grace.
func TestProvisionOneFailureMarked(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := []struct {
		name  string
		idle  string
		fail  func(p *vmPort)
		calls []string // verbs called, in order
		level string
	}{
		{"clone", "", nil, nil, "WARN"},
		{"ip", "", func(p *vmPort) { p.Fail("wait-ip", boom) }, []string{"wait-ip"}, "WARN"},
		{"power off", "", func(p *vmPort) { p.Fail("shutdown", boom) }, []string{"wait-ip", "shutdown"}, "WARN"},
		{"guest", config.IdleStateSuspended, func(p *vmPort) { p.Fail("wait-guest", boom) }, []string{"wait-ip", "wait-guest"}, "WARN"},
		{"record", config.IdleStateSuspended, func(p *vmPort) { p.Fail("record", boom) },
			[]string{"wait-ip", "wait-guest", "wait-ip", "record"}, "WARN"},
		{"suspend", config.IdleStateSuspended, func(p *vmPort) { p.Fail("suspend", boom) },
			[]string{"wait-ip", "wait-guest", "wait-ip", "record", "suspend"}, "WARN"},
		{"cut by the shutdown", "", func(p *vmPort) { p.Fail("wait-ip", context.Canceled) }, []string{"wait-ip"}, "INFO"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := provConfig()
			cfg.MaxCPUs = 100
			cfg.InventoryMode, cfg.InventoryRefreshInterval = config.InventoryShared, 30
			e := newProvEnv(t, cfg, tplVM("debian12", 2))
			if tc.fail != nil {
				tc.fail(e.port)
			} else {
				e.cloneErr = func(string) error { return boom }
			}
			task := v2Task(e, "large")
			task.IdleState = tc.idle
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.level == "INFO" {
				cancel()
			}
			e.p.ProvisionOne(ctx, task)

			var verbs []string
			for _, c := range e.port.List() {
				verbs = append(verbs, strings.Fields(c)[0])
			}
			assert.Equal(t, tc.calls, verbs)
			assert.True(t, e.p.Life.In(task.Name, lifecycle.Marked), "marked for deletion")
			assert.Equal(t, int64(4), e.counted(t), "released: still counted within the grace")
			lines := append(e.log.Lines(`msg="provisioning failed"`), e.log.Lines(`msg="provisioning cut by the shutdown"`)...)
			require.Len(t, lines, 1, e.log.String())
			assert.Contains(t, lines[0], "level="+tc.level)
		})
	}
}

// TestProvisionOneFailuresQuarantineTheTemplate: a VM of the template
// whose guest never gets an IP counts against the template; Threshold
// such failures quarantine it, and the next provisioning is deferred.
func TestProvisionOneFailuresQuarantineTheTemplate(t *testing.T) {
	t.Parallel()
	e := newProvEnv(t, nil, tplVM("debian12", 2))
	e.port.Fail("wait-ip", context.DeadlineExceeded, context.DeadlineExceeded)
	for slot := 1; slot <= 3; slot++ {
		task := v2Task(e, "")
		task.Name = task.Key.SlotName(slot)
		e.p.ProvisionOne(context.Background(), task)
	}
	assert.Len(t, e.cloneList(), 2, "the third is refused by the quarantine")
	assert.Contains(t, e.log.String(), `msg="template quarantined"`)
}

// TestProvisionOneHot: a hot pool's VM waits for its guest, records its
// idle state and IP, and is suspended (then it holds no capacity) or
// left running (it holds its footprint until the inventory counts it).
func TestProvisionOneHot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		idle    string
		calls   []string
		counted int64
		detail  string
	}{
		{config.IdleStateSuspended, []string{"wait-ip", "wait-guest", "wait-ip", "record", "suspend"}, 0, "cloned, got its ip, guest ready, suspended"},
		{config.IdleStatePoweredOn, []string{"wait-ip", "wait-guest", "wait-ip", "record"}, 4, "cloned, got its ip, guest ready, running idle"},
	}
	for _, tc := range cases {
		t.Run(tc.idle, func(t *testing.T) {
			t.Parallel()
			cfg := provConfig()
			cfg.MaxCPUs = 100
			cfg.InventoryMode, cfg.InventoryRefreshInterval = config.InventoryShared, 30
			e := newProvEnv(t, cfg, tplVM("debian12", 2))
			task := v2Task(e, "large")
			task.IdleState = tc.idle
			e.p.ProvisionOne(context.Background(), task)

			var verbs []string
			for _, c := range e.port.List() {
				verbs = append(verbs, strings.Fields(c)[0])
			}
			assert.Equal(t, tc.calls, verbs)
			assert.Zero(t, e.port.unbounded, "every wait is bounded")
			require.Len(t, e.port.records, 1)
			rec := e.port.records[0]
			assert.Equal(t, tc.idle, rec.IdleState)
			assert.Equal(t, provisionIP, rec.IPAddress, "the record a claim checks the resumed VM against")
			assert.True(t, rec.Provisioning)
			assert.Equal(t, tc.counted, e.counted(t))
			assert.Equal(t, lifecycle.Idle, e.p.Life.Phase(task.Name))
			assert.Contains(t, e.log.String(), `detail="`+tc.detail+`"`)
		})
	}
}

// TestProvisionPass: a pass fills the pools' deficits, V2 pools before
// V1 pools, round-robin, and skips, with one line each, the entries that
// cannot be filled now; the V1 models come from the CDS API.
func TestProvisionPass(t *testing.T) {
	t.Parallel()
	cfg := provConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{
		{ModelPath: "grp/m1", Number: 2},
		{ModelVMWare: "debian12", Number: 2},
		{ModelVMWare: "ubuntu", Number: 1, Flavor: "large"},
		{ModelVMWare: "debian12", Number: 1, Flavor: "huge"},
		{ModelVMWare: "centos", Number: 1},
		{ModelPath: "grp/m2", Number: 1},
	}
	tplM1 := tplVM("m1", 2)
	tplM1.Annotation = &inventory.Annotation{HatcheryName: testutil.Hatchery, Model: true, WorkerModelPath: "grp/m1", WorkerModelLastModified: "1700000000"}
	e := newProvEnv(t, cfg, tplVM("debian12", 2), tplVM("ubuntu", 2), tplM1)
	api := &cdsclienttest.Fake{Models: []sdk.Model{{Name: "m1", Group: &sdk.Group{Name: "grp"}}}, Allow: []string{"WorkerModelsEnabled"}}
	e.p.CDS = api

	e.p.Provision(context.Background())

	var got []string
	for _, c := range e.cloneList() {
		got = append(got, c.template+"/"+c.flavor)
	}
	assert.Equal(t, []string{"debian12/", "ubuntu/large", "debian12/", "m1/", "m1/"}, got)
	for _, c := range e.cloneList() {
		if c.template == "m1" {
			assert.Equal(t, "1700000000", c.annot.WorkerModelLastModified, "the version the template was built from")
		}
	}
	for _, skipped := range []string{"unknown flavor", "no template with that name", "model not enabled on the api"} {
		assert.Len(t, e.log.Lines(`msg="provisioning entry skipped"`, skipped), 1, skipped)
	}
}

// tplVM is a template of the inventory named name with cpus vCPUs.
func tplVM(name string, cpus int32) inventory.VM {
	return inventory.VM{Name: name, Template: true, NumCPU: cpus, MemoryMB: 2048, PowerState: "poweredOff"}
}
