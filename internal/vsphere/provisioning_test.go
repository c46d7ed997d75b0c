package vsphere

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"

	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"
)

// cloneCall is one call of the provisioning clone hook.
type cloneCall struct {
	template string
	name     string
	annot    inventory.Annotation
	flavor   string
}

// cloneRecorder replaces cloneVM: it records the calls and returns a VM
// object whose reference is warmRef(name), or err.
type cloneRecorder struct {
	mu    sync.Mutex
	calls []cloneCall
	err   func(name string) error
	hook  func()
}

func (r *cloneRecorder) clone(_ context.Context, template modelref.Template, name string, a *inventory.Annotation, f *config.Flavor) (vctypes.Ref, error) {
	if r.hook != nil {
		r.hook()
	}
	c := cloneCall{template: template.Name, name: name, annot: *a}
	if f != nil {
		c.flavor = f.Name
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.err != nil {
		if err := r.err(name); err != nil {
			return vctypes.Ref{}, err
		}
	}
	return warmRef(name), nil
}

func (r *cloneRecorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		out = append(out, c.name)
	}
	sort.Strings(out)
	return out
}

// refRecorder records the VM names a mocked call was made for.
type refRecorder struct {
	mu    sync.Mutex
	names []string
}

func (r *refRecorder) add(vm vctypes.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, vm.Value[len("vm-"):])
}

func (r *refRecorder) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.names...)
	sort.Strings(out)
	return out
}

// expectProvisionSteps expects n provisioned VMs to get their IP and be
// powered off, and records for which VMs.
func expectProvisionSteps(e *warmEnv, n int) (ip, off *refRecorder) {
	ip, off = &refRecorder{}, &refRecorder{}
	e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), gomock.Any(), "").Times(n).
		DoAndReturn(func(ctx context.Context, vm vctypes.Ref, _ string) (string, error) {
			if _, ok := ctx.Deadline(); !ok {
				return "", errors.New("ip wait must be bounded")
			}
			ip.add(vm)
			return "10.0.0.9", nil
		})
	e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), gomock.Any()).Times(n).
		DoAndReturn(func(_ context.Context, vm vctypes.Ref) error {
			off.add(vm)
			return nil
		})
	return ip, off
}

// provisionNameRE is a pool slot name (warmpool.Key.SlotName).
var provisionNameRE = regexp.MustCompile(`^warmpool-v[12]-[a-z0-9-]+-[0-9a-f]{6}-[0-9]+$`)

// TestProvisioningFillsPools: deficits per (model, flavor), V2 pools then V1,
// round-robin; each VM annotated, cloned, waited for and powered off.
func TestProvisioningFillsPools(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioningPoolSize = 1 // sequential: the queue order is observable
	cfg.WorkerProvisioning = []config.WorkerProvisioning{
		{ModelVMWare: "debian12", Number: 3},
		{ModelVMWare: "ubuntu", Number: 2, Flavor: "Large"},
		{ModelPath: "grp/m1", Number: 1},
	}
	modTime := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	other := warmProvVM("warmpool-v2-other", "debian12", "")
	other.Annotation.HatcheryName = "hatch-b"
	vms := []inventory.VM{
		warmTpl("debian12"), warmTpl("ubuntu"),
		warmVM("m1", wOff, wTemplate, wAnnot(func(a *inventory.Annotation) {
			a.Model = true
			a.WorkerModelPath = "grp/m1"
			a.WorkerModelLastModified = fmt.Sprint(modTime.Unix()) // up to date: no registration needed
		})),
		warmProvVM("warmpool-v2-have", "debian12", ""),       // counts for debian12
		warmProvVM("warmpool-v2-claimed", "debian12", ""),    // leaving the pool
		warmProvVM("warmpool-v2-large", "debian12", "large"), // another pool
		other, // not ours
		warmProvVM("warmpool-v2-tobedeleted", "debian12", ""),     // leaving the pool
		warmProvVM("warmpool-v2-booting", "ubuntu", "large", wOn), // being provisioned
	}
	cds := &cdsclienttest.Fake{Models: []sdk.Model{{Name: "m1", Group: &sdk.Group{Name: "grp"}, UserLastModified: modTime}}}
	e := newWarmEnv(t, cfg, vms, cds)
	putPhase(e.h, "warmpool-v2-claimed", lifecycle.Claimed, lifecycle.WithRef("vm-warmpool-v2-claimed"))
	e.h.markToDelete("warmpool-v2-tobedeleted")
	putPhase(e.h, "warmpool-v2-booting", lifecycle.Provisioning)
	putPhase(e.h, "warmpool-v2-booting", lifecycle.Provisioning, lifecycle.WithPool(warmpool.Key{Model: "ubuntu", Flavor: "large"}.Pool()))
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)
	// warmpool-v2-large is surplus (no pool for it) and idle: removed.
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-large")).Return(nil)
	ip, off := expectProvisionSteps(e, 4)

	e.h.pool.Provision(context.Background())

	var templates []string
	for _, c := range rec.calls {
		templates = append(templates, c.template)
		assert.Regexp(t, provisionNameRE, c.name)
		assert.Equal(t, c.name, c.annot.WorkerName)
		assert.Equal(t, warmHatcheryName, c.annot.HatcheryName)
		assert.True(t, c.annot.Provisioning)
		assert.Equal(t, warmNow, c.annot.Created)
		switch c.template {
		case "debian12":
			assert.Contains(t, c.name, "warmpool-v2-")
			assert.Equal(t, "debian12", c.annot.VMwareModelPath)
			assert.Empty(t, c.annot.Flavor)
			assert.Empty(t, c.flavor)
		case "ubuntu":
			assert.Equal(t, "ubuntu", c.annot.VMwareModelPath)
			assert.Equal(t, "large", c.annot.Flavor)
			assert.Equal(t, "large", c.flavor)
		case "m1":
			assert.Contains(t, c.name, "warmpool-v1-")
			assert.Equal(t, "grp/m1", c.annot.WorkerModelPath)
			assert.Equal(t, fmt.Sprint(modTime.Unix()), c.annot.WorkerModelLastModified)
		}
	}
	assert.Equal(t, []string{"debian12", "ubuntu", "debian12", "m1"}, templates)
	assert.Equal(t, rec.names(), ip.sorted())
	assert.Equal(t, rec.names(), off.sorted())
	assert.Equal(t, []string{"warmpool-v2-booting"}, namesIn(e.h, lifecycle.Provisioning), "only the pass's own names are released")
}

// TestProvisioningBoundedAndJoined: at most workerProvisioningPoolSize
// clones run at once, and the pass returns only when all have ended.
func TestProvisioningBoundedAndJoined(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioningPoolSize = 2
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 6}}
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)

	var active, maxActive, finished atomic.Int64
	entered := make(chan struct{}, 6)
	release := make(chan struct{})
	rec := &cloneRecorder{hook: func() {
		n := active.Add(1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		active.Add(-1)
		finished.Add(1)
	}}
	e.h.pool.Clone = poolClone(rec.clone)
	expectProvisionSteps(e, 6)

	done := make(chan struct{})
	go func() {
		defer close(done)
		e.h.pool.Provision(context.Background())
	}()
	<-entered
	<-entered
	assert.Equal(t, int64(2), active.Load(), "two clones in flight")
	close(release)
	<-done

	assert.Equal(t, int64(6), finished.Load(), "every clone ended before the pass returned")
	assert.LessOrEqual(t, maxActive.Load(), int64(2))
	assert.Zero(t, len(namesIn(e.h, lifecycle.Provisioning)))
}

// TestProvisioningFailuresMarked: a VM that fails to clone, to get its IP
// or to power off is marked for deletion; nothing stays pending.
func TestProvisioningFailuresMarked(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := []struct {
		name  string
		setup func(e *warmEnv, rec *cloneRecorder)
	}{
		{"clone", func(_ *warmEnv, rec *cloneRecorder) {
			rec.err = func(string) error { return boom }
		}},
		{"ip", func(e *warmEnv, _ *cloneRecorder) {
			e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), gomock.Any(), "").Return("", context.DeadlineExceeded)
		}},
		{"power off", func(e *warmEnv, _ *cloneRecorder) {
			e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), gomock.Any(), "").Return("10.0.0.1", nil)
			e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), gomock.Any()).Return(boom)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := warmConfig()
			cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1}}
			e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)
			rec := &cloneRecorder{}
			e.h.pool.Clone = poolClone(rec.clone)
			tc.setup(e, rec)

			e.h.pool.Provision(context.Background())

			require.Len(t, rec.calls, 1)
			assert.Equal(t, []string{rec.calls[0].name}, markedNames(e.h))
			assert.Zero(t, len(namesIn(e.h, lifecycle.Provisioning)))
		})
	}
}

// TestProvisioningSkips: entries that cannot be provisioned now are skipped
// with a log line, never cloned.
func TestProvisioningSkips(t *testing.T) {
	t.Parallel()
	tplM1 := warmVM("m1", wOff, wTemplate, wAnnot(func(a *inventory.Annotation) { a.Model = true; a.WorkerModelPath = "grp/m1" }))
	foreignTplM1 := warmVM("m1", wOff, wTemplate, wAnnot(func(a *inventory.Annotation) {
		a.HatcheryName = "hatch-b"
		a.Model = true
		a.WorkerModelPath = "grp/m1"
	}))
	m1 := sdk.Model{Name: "m1", Group: &sdk.Group{Name: "grp"}}
	cases := []struct {
		name    string
		entries []config.WorkerProvisioning
		vms     []inventory.VM
		cds     *cdsclienttest.Fake
	}{
		{"v1 without api client", []config.WorkerProvisioning{{ModelPath: "grp/m1", Number: 1}}, []inventory.VM{tplM1}, nil},
		{"v1 api error", []config.WorkerProvisioning{{ModelPath: "grp/m1", Number: 1}}, []inventory.VM{tplM1}, &cdsclienttest.Fake{ModelsErr: errors.New("down")}},
		{"v1 model not enabled", []config.WorkerProvisioning{{ModelPath: "grp/m1", Number: 1}}, []inventory.VM{tplM1}, &cdsclienttest.Fake{}},
		{"v1 model needs registration", []config.WorkerProvisioning{{ModelPath: "grp/m1", Number: 1}}, []inventory.VM{tplM1},
			&cdsclienttest.Fake{Models: []sdk.Model{{Name: "m1", Group: &sdk.Group{Name: "grp"}, NeedRegistration: true}}}},
		{"v1 no template of ours", []config.WorkerProvisioning{{ModelPath: "grp/m1", Number: 1}}, []inventory.VM{foreignTplM1}, &cdsclienttest.Fake{Models: []sdk.Model{m1}}},
		{"v2 template missing", []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1}}, nil, nil},
		{"unknown flavor", []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1, Flavor: "huge"}}, []inventory.VM{warmTpl("debian12")}, nil},
		{"no model", []config.WorkerProvisioning{{Number: 1}}, []inventory.VM{warmTpl("debian12")}, nil},
		{"pool full", []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1}},
			[]inventory.VM{warmTpl("debian12"), warmProvVM("warmpool-v2-a", "debian12", "")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := warmConfig()
			cfg.WorkerProvisioning = tc.entries
			e := newWarmEnv(t, cfg, tc.vms, tc.cds)
			rec := &cloneRecorder{}
			e.h.pool.Clone = poolClone(rec.clone)
			e.h.pool.Provision(context.Background())
			assert.Empty(t, rec.calls)
		})
	}
}

// TestProvisioningStopsOnContext: no clone starts once ctx has ended.
func TestProvisioningStopsOnContext(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 3}}
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.h.pool.Provision(ctx)
	assert.Empty(t, rec.calls)
}

// TestProvisioningSurplusRemovesOnlyIdle: when a pool is above its number,
// only idle provisioned VMs of ours go, oldest first; VMs being provisioned,
// claimed or marked, other pools within their number, powered-on VMs and
// other hatcheries' VMs stay.
func TestProvisioningSurplusRemovesOnlyIdle(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{
		{ModelVMWare: "debian12", Number: 2},
		{ModelVMWare: "ubuntu", Number: 1},
	}
	other := warmProvVM("warmpool-v2-other", "debian12", "", wCreated(48*time.Hour))
	other.Annotation.HatcheryName = "hatch-b"
	vms := []inventory.VM{
		warmTpl("debian12"), warmTpl("ubuntu"), warmTpl("centos"),
		warmProvVM("warmpool-v2-d1", "debian12", "", wCreated(4*time.Hour)),
		warmProvVM("warmpool-v2-d2", "debian12", "", wCreated(3*time.Hour)),
		warmProvVM("warmpool-v2-d3", "debian12", "", wCreated(2*time.Hour)),
		warmProvVM("warmpool-v2-d4", "debian12", "", wCreated(1*time.Hour)),
		warmProvVM("warmpool-v2-dclaimed", "debian12", "", wCreated(5*time.Hour)),
		warmProvVM("warmpool-v2-dbooting", "debian12", "", wOn, wCreated(6*time.Hour)),
		warmProvVM("warmpool-v2-dlarge", "debian12", "large"), // flavor no longer configured
		warmProvVM("warmpool-v2-u1", "ubuntu", ""),
		warmProvVM("warmpool-v2-c1", "centos", ""), // entry removed
		warmProvVM("warmpool-v2-c2", "centos", "", wOn),
		other,
	}
	e := newWarmEnv(t, cfg, vms, &cdsclienttest.Fake{})
	putPhase(e.h, "warmpool-v2-dclaimed", lifecycle.Claimed, lifecycle.WithRef("vm-warmpool-v2-dclaimed"))
	putPhase(e.h, "warmpool-v2-dbooting", lifecycle.Provisioning)
	putPhase(e.h, "warmpool-v2-dbooting", lifecycle.Provisioning, lifecycle.WithPool(warmpool.Key{Model: "debian12"}.Pool()))
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)
	// debian12: d1..d4 + dbooting = 5 in the pool, 2 configured: the 3 oldest idle go.
	for _, n := range []string{"warmpool-v2-d1", "warmpool-v2-d2", "warmpool-v2-d3", "warmpool-v2-dlarge", "warmpool-v2-c1"} {
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs(n)).Return(nil)
	}

	e.h.pool.Provision(context.Background())

	assert.Empty(t, rec.calls, "no pool is short")
	assert.Zero(t, len(markedNames(e.h)))
	assert.Equal(t, []string{"warmpool-v2-dclaimed"}, namesIn(e.h, lifecycle.Claimed), "the claim is untouched, surplus locks released")
}

// TestProvisioningSurplusDeletionFailureRetried: a surplus VM whose destroy
// fails stays marked; the next cleanup pass destroys it.
func TestProvisioningSurplusDeletionFailureRetried(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	vm := warmProvVM("warmpool-v2-d1", "debian12", "")
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12"), vm}, &cdsclienttest.Fake{})
	gomock.InOrder(
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-d1")).Return(errors.New("busy")),
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("warmpool-v2-d1")).Return(nil),
	)
	e.h.pool.Provision(context.Background())
	require.True(t, isMarked(e.h, "warmpool-v2-d1"))
	assert.Zero(t, len(namesIn(e.h, lifecycle.Claimed)))

	// Marked: neither claimed nor counted meanwhile.
	got, err := e.h.pool.Claim(context.Background(), v2Model("debian12"), nil, true)
	require.NoError(t, err)
	assert.Nil(t, got)

	e.h.killAwolServers(context.Background())
	assert.False(t, isMarked(e.h, "warmpool-v2-d1"))
}

// TestProvisioningClonesMissingSlots: a pool of 3 whose slot 1 exists is
// refilled into slots 0 and 2, by name; a slot whose VM is still in the
// lifecycle table (being provisioned) is not cloned again, one destroyed
// and no longer listed is.
func TestProvisioningClonesMissingSlots(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 4}}
	key := warmpool.Key{Model: "debian12"}
	vms := []inventory.VM{warmTpl("debian12"), warmProvVM(key.SlotName(1), "debian12", "")}
	e := newWarmEnv(t, cfg, vms, nil)
	putPhase(e.h, key.SlotName(3), lifecycle.Provisioning, lifecycle.WithPool(key.Pool()))
	// Destroyed by an earlier cleanup and no longer listed: free again.
	putPhase(e.h, key.SlotName(0), lifecycle.Deleting, lifecycle.WithRef("vm-destroyed"))
	putPhase(e.h, key.SlotName(0), lifecycle.Destroyed)
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)
	expectProvisionSteps(e, 2)

	e.h.pool.Provision(context.Background())

	got := rec.names()
	sort.Strings(got)
	want := []string{key.SlotName(0), key.SlotName(2)}
	sort.Strings(want)
	assert.Equal(t, want, got)
}

// TestProvisioningRefillsClaimedSlots: a slot whose VM was claimed (the
// VM now a worker under another name) is refilled by the next pass, with no
// claim in between; a slot whose claimed VM the inventory still shows as a
// pool VM (a lagging snapshot) is not.
func TestProvisioningRefillsClaimedSlots(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 2}}
	key := warmpool.Key{Model: "debian12"}
	worker := warmVM("debian12-worker", wOn) // slot 0's VM, renamed and re-annotated by its claim
	worker.Ref = warmRef(key.SlotName(0))
	lagging := warmProvVM(key.SlotName(1), "debian12", "") // slot 1's VM, claimed, still shown idle
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12"), worker, lagging}, nil)
	putPhase(e.h, key.SlotName(0), lifecycle.Claimed, lifecycle.WithRef(warmRef(key.SlotName(0)).Value), lifecycle.WithPool(key.Pool()))
	putPhase(e.h, key.SlotName(1), lifecycle.Claimed, lifecycle.WithRef(lagging.Ref.Value), lifecycle.WithPool(key.Pool()))
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)
	expectProvisionSteps(e, 1)

	e.h.pool.Provision(context.Background())

	assert.Equal(t, []string{key.SlotName(0)}, rec.names())
	assert.True(t, e.h.life.In(key.SlotName(1), lifecycle.Claimed), "a claim the inventory does not show yet stays")
}

// TestProvisioningReusesAFailedSlot: a slot whose provisioning failed (its
// name marked) and whose VM no listing shows is cloned again once a
// snapshot would have shown the VM (the release grace); until then it is
// left alone. Without this a failed clone held its slot for the 15 minutes
// an absent mark lives, and the pool stayed short.
func TestProvisioningReusesAFailedSlot(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1}}
	key := warmpool.Key{Model: "debian12"}
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)
	require.Positive(t, e.h.releaseGrace())
	putPhase(e.h, key.SlotName(0), lifecycle.Marked) // its clone failed just now
	rec := &cloneRecorder{}
	e.h.pool.Clone = poolClone(rec.clone)

	e.h.pool.Provision(context.Background())
	assert.Empty(t, rec.names(), "a snapshot may not show the failed clone's VM yet")

	later := warmNow.Add(e.h.releaseGrace() + time.Second)
	e.h.now = func() time.Time { return later }
	expectProvisionSteps(e, 1)
	e.h.pool.Provision(context.Background())
	assert.Equal(t, []string{key.SlotName(0)}, rec.names())
}

// debian12PoolWithLogs is a warm env with one pool of n debian12 VMs, one
// clone at a time, whose hatchery and pool log (debug) to the buffer
// returned.
func debian12PoolWithLogs(t *testing.T, n int) (*warmEnv, *testutil.SyncBuffer) {
	t.Helper()
	cfg := warmConfig()
	cfg.WorkerProvisioningPoolSize = 1
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: n}}
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)
	logs := &testutil.SyncBuffer{}
	e.h.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.h.pool.Log = e.h.log
	return e, logs
}

// TestProvisioningDuplicateSlotIsNotAnError: another instance cloned the
// same slot first (vCenter answers DuplicateName): the slot counts as
// filled, nothing is marked for deletion (the VM is the other instance's
// to finish), no warning is logged, and the pass goes on with the other
// slots.
func TestProvisioningDuplicateSlotIsNotAnError(t *testing.T) {
	t.Parallel()
	key := warmpool.Key{Model: "debian12"}
	e, logs := debian12PoolWithLogs(t, 2)
	rec := &cloneRecorder{err: func(name string) error {
		if name == key.SlotName(0) {
			return fmt.Errorf("clone %q: %w", name, task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{
				Fault: &types.DuplicateName{Name: name}, LocalizedMessage: "The name already exists."}})
		}
		return nil
	}}
	e.h.pool.Clone = poolClone(rec.clone)
	expectProvisionSteps(e, 1) // slot 1 only

	e.h.pool.Provision(context.Background())

	assert.Equal(t, []string{key.SlotName(0), key.SlotName(1)}, rec.names())
	assert.False(t, isMarked(e.h, key.SlotName(0)), "another instance's vm is never marked")
	assert.Equal(t, lifecycle.Gone, e.h.life.Phase(key.SlotName(0)), "the slot is left to the other instance")
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "pool slot filled by another instance")
}

// TestProvisioningWithoutAFreeAddressIsDeferred: a refill whose clone finds
// every static address held (ippool.ErrNoIPAvailable: running workers, the
// other instance's locks) is a capacity state, not a fault: the pass logs
// one INFO line with the reason code, marks nothing, and the next pass
// clones the slot once an address is free.
func TestProvisioningWithoutAFreeAddressIsDeferred(t *testing.T) {
	t.Parallel()
	key := warmpool.Key{Model: "debian12"}
	e, logs := debian12PoolWithLogs(t, 1)
	rec := &cloneRecorder{err: func(name string) error {
		return fmt.Errorf("clone %q: reserve ip: %w", name, ippool.ErrNoIPAvailable)
	}}
	e.h.pool.Clone = poolClone(rec.clone)

	e.h.pool.Provision(context.Background())

	assert.Equal(t, []string{key.SlotName(0)}, rec.names())
	assert.False(t, isMarked(e.h, key.SlotName(0)), "nothing was cloned: nothing to delete")
	assert.Equal(t, lifecycle.Gone, e.h.life.Phase(key.SlotName(0)))
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "provisioning deferred to the next pass")
	assert.Contains(t, logs.String(), "reason="+string(refusal.ReasonIP))
}

// TestProvisioningCutByTheShutdownIsNoWarning: a refill whose clone ends
// because the shutdown cancelled the pass logs why at INFO: a healthy stop
// logs no WARN.
func TestProvisioningCutByTheShutdownIsNoWarning(t *testing.T) {
	t.Parallel()
	e, logs := debian12PoolWithLogs(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &cloneRecorder{err: func(name string) error {
		cancel() // SIGTERM while the clone task runs
		return fmt.Errorf("clone %q: wait for task: %w", name, context.Canceled)
	}}
	e.h.pool.Clone = poolClone(rec.clone)

	e.h.pool.Provision(ctx)

	require.Len(t, rec.names(), 1)
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "provisioning cut by the shutdown")
}

// TestProvisioningCloneFailureLeavesProvisioningOnce: a warm-pool clone
// that fails, or that the shutdown cuts, through the hatchery's own clone
// (cloneVM, not a recorder): the slot's entry leaves Provisioning once, for
// Marked, by its provisioning. The clone marked it first (its entry or
// not), so the provisioning's mark found it marked already, took it for
// not settled and its last move (Provisioning -> Gone) was refused: a
// lifecycle bug, the ERROR TestRollingUpgradeWithDrain saw at a stop.
func TestProvisioningCloneFailureLeavesProvisioningOnce(t *testing.T) {
	t.Parallel()
	key := warmpool.Key{Model: "debian12"}
	slot := key.SlotName(0)
	for _, cut := range []bool{false, true} {
		name := "failed"
		if cut {
			name = "cut by the shutdown"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newSpFixture(t, spConfig())
			f.inv.Add(inventory.VM{Name: "debian12", Template: true})
			tmpl := spRef("VirtualMachine", "vm-debian12")
			f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), "debian12").Return(tmpl, nil)
			f.expectCloneSpecCalls(tmpl, 1)
			f.vs.EXPECT().LoadFolder(gomock.Any()).Return(spFolderRef, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), vcenter.MORef(tmpl), gomock.Any(), slot, gomock.Any()).
				DoAndReturn(func(context.Context, types.ManagedObjectReference, types.ManagedObjectReference, string, *types.VirtualMachineCloneSpec) (*types.ManagedObjectReference, error) {
					if cut {
						cancel() // SIGTERM while the clone task runs
						return nil, fmt.Errorf("wait for task: %w", context.Canceled)
					}
					return nil, errors.New("boom")
				})

			f.h.pool.ProvisionOne(ctx, warmpool.Task{Key: key, Name: slot, Template: modelref.OfEntry("", "debian12")})

			assert.Empty(t, f.h.life.Bugs(), "every certain move of the provisioning accepted")
			assert.Equal(t, []string{slot}, markedNames(f.h), "the slot's half-made vm marked")
			assert.Empty(t, namesIn(f.h, lifecycle.Provisioning, lifecycle.Cloning))
		})
	}
}

// TestProvisioningRespectsStaticLimits: a provisioned VM is powered on until
// it has its IP, so provisioning reserves its footprint against maxCpus like
// a spawn: with 2 of 6 vCPUs used by a worker and 2-vCPU templates, two
// clones in flight at once leave no room for a third, which is deferred to
// the next pass; the reservations end once the VMs are powered off.
func TestProvisioningRespectsStaticLimits(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.MaxCPUs = 6
	cfg.WorkerProvisioningPoolSize = 3
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 3}}
	tpl := warmTpl("debian12")
	tpl.NumCPU, tpl.MemoryMB = 2, 2048
	worker := warmVM("worker-1", func(v *inventory.VM) { v.NumCPU, v.MemoryMB = 2, 2048 })
	e := newWarmEnv(t, cfg, []inventory.VM{tpl, worker}, nil)
	deferred := make(chan struct{})
	e.h.log = slog.New(&messageSignal{msg: "provisioning deferred to the next pass", ch: deferred})
	e.h.pool.Log = e.h.log
	entered := make(chan struct{}, 3)
	release := make(chan struct{})
	rec := &cloneRecorder{hook: func() { entered <- struct{}{}; <-release }}
	e.h.pool.Clone = poolClone(rec.clone)
	expectProvisionSteps(e, 2)

	done := make(chan struct{})
	go func() { defer close(done); e.h.pool.Provision(context.Background()) }()
	<-entered
	<-entered
	select {
	case <-deferred: // the third decision, with two clones in flight
	case <-entered:
		close(release)
		<-done
		t.Fatal("a third clone started: maxCpus overshot")
	}
	close(release)
	<-done

	assert.Len(t, rec.names(), 2, "2 used + 2 + 2 = 6 vCPUs: a third clone would overshoot maxCpus")
	n, _ := e.h.capacity.Ledger().Held()
	assert.Zero(t, n, "powered off: the provisioned vms hold no capacity")

	// The next pass provisions the third: the two are powered off.
	expectProvisionSteps(e, 1)
	e.h.pool.Provision(context.Background())
	assert.Len(t, rec.names(), 3)
}

// TestProvisioningWithoutStaticLimitFillsThePool: without maxCpus or
// maxMemoryMB nothing is checked (and nothing read) before a clone.
func TestProvisioningWithoutStaticLimitFillsThePool(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.WorkerProvisioningPoolSize = 3
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 3}}
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("debian12")}, nil)
	entered := make(chan struct{}, 3)
	release := make(chan struct{})
	rec := &cloneRecorder{hook: func() { entered <- struct{}{}; <-release }}
	e.h.pool.Clone = poolClone(rec.clone)
	expectProvisionSteps(e, 3)
	done := make(chan struct{})
	go func() { defer close(done); e.h.pool.Provision(context.Background()) }()
	for range 3 {
		<-entered // all three in flight at once
	}
	close(release)
	<-done
	assert.Len(t, rec.names(), 3)
}

// messageSignal is a slog handler closing ch at the first record whose
// message is msg: a test waits on a logged decision instead of sleeping.
type messageSignal struct {
	msg  string
	ch   chan struct{}
	once sync.Once
}

func (m *messageSignal) Enabled(context.Context, slog.Level) bool { return true }
func (m *messageSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == m.msg {
		m.once.Do(func() { close(m.ch) })
	}
	return nil
}
func (m *messageSignal) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m *messageSignal) WithGroup(string) slog.Handler      { return m }

// TestProvisioningReservationCountsForSpawns: while a provisioning clone is
// in flight, a spawn decision counts its footprint; a failed provisioning
// keeps it for the release grace (its VM may still be powered on).
func TestProvisioningReservationCountsForSpawns(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.MaxCPUs = 4
	cfg.WorkerProvisioningPoolSize = 1
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Number: 1}}
	tpl := warmTpl("debian12")
	tpl.NumCPU, tpl.MemoryMB = 2, 2048
	e := newWarmEnv(t, cfg, []inventory.VM{tpl}, nil)
	e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vctypes.Ref{}, errors.New("no pool")).AnyTimes()
	model := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "debian", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: "debian12"},
	}
	inClone := make(chan struct{})
	proceed := make(chan struct{})
	rec := &cloneRecorder{hook: func() { close(inClone); <-proceed }, err: func(string) error { return errors.New("clone refused") }}
	e.h.pool.Clone = poolClone(rec.clone)
	done := make(chan struct{})
	go func() { defer close(done); e.h.pool.Provision(context.Background()) }()
	<-inClone

	ok, err := e.h.CanAllocateResources(context.Background(), model, "job-1", nil)
	require.NoError(t, err)
	assert.True(t, ok, "2 in flight + 2 = 4 vCPUs fits")
	ok, err = e.h.CanAllocateResources(context.Background(), model, "job-2", nil)
	require.NoError(t, err)
	assert.False(t, ok, "2 provisioning + 2 job-1 + 2 = 6 > 4")
	close(proceed)
	<-done
	e.h.releaseCapacity("job-1")

	ok, err = e.h.CanAllocateResources(context.Background(), model, "job-3", nil)
	require.NoError(t, err)
	assert.False(t, ok, "the failed provisioning and job-1 are held for the release grace")
}
