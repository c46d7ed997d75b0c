package custody_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// The custody's tests drive it through a fake of its port that records
// every call, without vCenter, the hatchery or the warm pool.

const hatch = testutil.Hatchery

var now0 = testutil.Epoch

// fakePort records the calls made to it ("verb vm-id") and answers each
// verb with the next error queued for it (nil when none is left): the
// fixture kit's CallLog; it keeps the records written and the context
// state of each scrub besides.
type fakePort struct {
	testutil.CallLog
	mu      sync.Mutex
	records []vctypes.ConfigChange // the record writes' changes
	scrubs  []vctypes.ConfigChange // the userdata scrubs' changes
	ctxErr  []error                // ctx.Err() of each scrub
}

func (f *fakePort) call(verb string, vm vctypes.Ref) error { return f.Call(verb, vm.Value) }

func (f *fakePort) ShutdownVirtualMachine(_ context.Context, vm vctypes.Ref) error {
	return f.call("shutdown", vm)
}

func (f *fakePort) DestroyVirtualMachine(_ context.Context, vm vctypes.Ref) error {
	return f.call("destroy", vm)
}

// ReconfigureVirtualMachine logs a change carrying a record as "record",
// another as "scrub" (the custody's two reconfigures).
func (f *fakePort) ReconfigureVirtualMachine(ctx context.Context, vm vctypes.Ref, change vctypes.ConfigChange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if change.Record != nil {
		f.records = append(f.records, change)
		return f.call("record", vm)
	}
	f.scrubs = append(f.scrubs, change)
	f.ctxErr = append(f.ctxErr, ctx.Err())
	return f.call("scrub", vm)
}

// env is a Custody on a fake port, a fixed inventory, a lifecycle table
// and an IP pool of 10.0.0.1-10.0.0.2; logs collects its log lines.
type env struct {
	c    *custody.Custody
	port *fakePort
	inv  *inventorytest.Fixed
	life *lifecycle.Table
	ips  *ippool.Pool
	logs *testutil.SyncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := func() time.Time { return now0 }
	ips, err := ippool.New(&config.Config{IPRange: "10.0.0.1/30"})
	require.NoError(t, err)
	e := &env{port: &fakePort{}, inv: inventorytest.New(), life: lifecycle.New(clock), ips: ips, logs: &testutil.SyncBuffer{}}
	e.c = &custody.Custody{
		Hatchery: hatch, Port: e.port, Inventory: e.inv, Life: e.life, IPs: ips,
		Quarantine: quarantine.New(quarantine.Policy{Threshold: 2, BackoffBase: time.Minute, BackoffMax: time.Hour}, clock),
		Log:        slog.New(slog.NewTextHandler(e.logs, nil)),
	}
	return e
}

// ours is a powered-on worker VM of hatch (reference vm-<name>) holding ip.
func ours(name, ip string) inventory.VM {
	v := inventory.VM{Name: name, Annotation: &inventory.Annotation{HatcheryName: hatch, WorkerName: name, IPAddress: ip}}
	v.Ref.Type, v.Ref.Value = "VirtualMachine", "vm-"+name
	v.PowerState = "poweredOn"
	return v
}

func phaseOf(t *testing.T, life *lifecycle.Table, name string) lifecycle.Phase {
	t.Helper()
	e, ok := life.Get(name)
	if !ok {
		return lifecycle.Gone
	}
	return e.Phase
}

// TestMarkToDelete: the first mark of a name is new, the second is not,
// and a VM being deleted stays in that phase. It fails if the mark did not
// go through the lifecycle table's Markable group (a second mark new, or
// a Deleting VM moved back to Marked).
func TestMarkToDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	assert.True(t, e.c.MarkToDelete("w-1"), "a new mark")
	assert.Equal(t, lifecycle.Marked, phaseOf(t, e.life, "w-1"))
	assert.False(t, e.c.MarkToDelete("w-1"), "marked already")

	_, err := e.life.MoveFrom("w-2", lifecycle.Deletable(), lifecycle.Deleting)
	require.NoError(t, err)
	assert.False(t, e.c.MarkToDelete("w-2"), "being deleted")
	assert.Equal(t, lifecycle.Deleting, phaseOf(t, e.life, "w-2"))
	assert.Empty(t, e.port.List(), "a mark makes no vCenter call")
}

// TestDeleteRefusesWhatIsNotOurs: a VM without this hatchery's record and
// a template that is not our model template are refused before any
// vCenter call and before any phase moves. It fails if an ownership check
// were loosened (a call recorded, or no error).
func TestDeleteRefusesWhatIsNotOurs(t *testing.T) {
	t.Parallel()
	foreign := ours("w-foreign", "")
	foreign.Annotation.HatcheryName = "hatch-b"
	bare := ours("w-bare", "")
	bare.Annotation = nil
	tpl := ours("tpl", "")
	tpl.Template = true
	for _, vm := range []inventory.VM{foreign, bare, tpl} {
		t.Run(vm.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.c.ReportRegistration = func(context.Context, inventory.VM) { t.Error("registration reported for a refused vm") }
			e.c.MarkToDelete(vm.Name)
			err := e.c.Delete(context.Background(), vm, custody.StopRunning)
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmt.Sprintf("delete vm %q", vm.Name))
			assert.Empty(t, e.port.List())
			assert.Equal(t, lifecycle.Marked, phaseOf(t, e.life, vm.Name), "the phase does not move")
			assert.Contains(t, e.logs.String(), "refusing to delete vm")
		})
	}
}

// TestDeleteDestroysOurs: a powered-on VM of ours is powered off, then
// destroyed; it ends Destroyed in the table, its address reservation is
// released and the inventory invalidated. Our model template may go too.
func TestDeleteDestroysOurs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := e.ips.Reserve(context.Background(), nil, "w-1")
	require.NoError(t, err)
	vm := ours("w-1", l.IP)
	e.c.MarkToDelete("w-1")
	require.NoError(t, e.c.Delete(context.Background(), vm, custody.StopRunning))
	assert.Equal(t, []string{"shutdown vm-w-1", "destroy vm-w-1"}, e.port.List())
	assert.Equal(t, lifecycle.Destroyed, phaseOf(t, e.life, "w-1"))
	assert.Empty(t, e.ips.Reserved(), "the address is free again")
	assert.Positive(t, e.inv.Invalidations())

	model := ours("tpl-model", "")
	model.Template, model.Annotation.Model = true, true
	model.PowerState = "poweredOff"
	require.NoError(t, e.c.Delete(context.Background(), model, custody.StopRunning))
	assert.Equal(t, "destroy vm-tpl-model", e.port.List()[2], "a powered-off vm is destroyed without a power off")
}

// TestDeleteFaults: a power off answered "not found" (the other instance
// destroyed it) is not an error; a destroy refused for the power state
// powers off and destroys again; any other failure leaves the VM marked.
func TestDeleteFaults(t *testing.T) {
	t.Parallel()
	notFound := &vctypes.Fault{Kind: vctypes.FaultNotFound, Err: errors.New("gone")}
	badPower := &vctypes.Fault{Kind: vctypes.FaultInvalidPowerState, Err: errors.New("powered on")}
	boom := errors.New("boom")

	e := newEnv(t)
	e.port.Fail("shutdown", notFound)
	require.NoError(t, e.c.Delete(context.Background(), ours("w-gone", ""), custody.StopRunning))
	assert.Equal(t, []string{"shutdown vm-w-gone", "destroy vm-w-gone"}, e.port.List())

	e = newEnv(t)
	vm := ours("w-late", "")
	vm.PowerState = "poweredOff"
	e.port.Fail("destroy", badPower)
	require.NoError(t, e.c.Delete(context.Background(), vm, custody.StopRunning))
	assert.Equal(t, []string{"destroy vm-w-late", "shutdown vm-w-late", "destroy vm-w-late"}, e.port.List())

	e = newEnv(t)
	e.port.Fail("destroy", boom)
	err := e.c.Delete(context.Background(), ours("w-fail", ""), custody.StopRunning)
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), `delete vm "w-fail": destroy`)
	assert.Equal(t, lifecycle.Marked, phaseOf(t, e.life, "w-fail"), "retried by the next cleanup pass")
}

// TestDeleteInProgress: a VM another loop is deleting is not touched.
func TestDeleteInProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.life.MoveFrom("w-1", lifecycle.Deletable(), lifecycle.Deleting)
	require.NoError(t, err)
	err = e.c.Delete(context.Background(), ours("w-1", ""), custody.StopRunning)
	require.ErrorIs(t, err, custody.ErrDeleteInProgress)
	assert.Empty(t, e.port.List())
	assert.Equal(t, lifecycle.Deleting, phaseOf(t, e.life, "w-1"))
}

// TestDeleteReportsRegistration: a registration VM (register- prefix or a
// RegisterOnly record) is reported before its power off; a worker is not.
func TestDeleteReportsRegistration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var reported []string
	e.c.ReportRegistration = func(_ context.Context, vm inventory.VM) {
		reported = append(reported, fmt.Sprintf("%s after %d calls", vm.Name, len(e.port.List())))
	}
	only := ours("w-only", "")
	only.Annotation.RegisterOnly = true
	for _, vm := range []inventory.VM{ours("register-m1", ""), only, ours("w-1", "")} {
		require.NoError(t, e.c.Delete(context.Background(), vm, custody.StopRunning))
	}
	assert.Equal(t, []string{"register-m1 after 0 calls", "w-only after 2 calls"}, reported)
}

// TestWriteRecord: the record goes to the VM's reference in one
// reconfigure carrying only the record (its Notes and their mirror read
// back as annot), the inventory is invalidated even when the write fails,
// and a failure names the worker and wraps the cause.
func TestWriteRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	annot := &inventory.Annotation{HatcheryName: hatch, WorkerName: "w-1", IdleState: config.IdleStateSuspended}
	ref := vctypes.Ref{Type: "VirtualMachine", Value: "vm-w-1"}
	require.NoError(t, e.c.WriteRecord(context.Background(), ref, annot))
	assert.Equal(t, []string{"record vm-w-1"}, e.port.List())
	rec := annot.Record()
	assert.Equal(t, vctypes.ConfigChange{Record: &rec}, e.port.records[0])
	notes, err := inventory.AnnotationFromVM(e.port.records[0].Record.Notes, nil)
	require.NoError(t, err)
	mirror, err := inventory.AnnotationFromVM("", e.port.records[0].Record.Options)
	require.NoError(t, err)
	assert.Equal(t, *annot, *notes)
	assert.Equal(t, *annot, *mirror)
	assert.Equal(t, int64(1), e.inv.Invalidations())

	boom := errors.New("boom")
	e.port.Fail("record", boom)
	err = e.c.WriteRecord(context.Background(), ref, annot)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, `write annotation of vm "w-1": boom`, err.Error())
	assert.Equal(t, int64(2), e.inv.Invalidations())
}

// TestScrubUserdata: a tracked VM is scrubbed on a context that survives
// the caller's cancellation, in one reconfigure emptying every guestinfo
// key of the userdata (cloudinit.ScrubOptions) and nothing else, and is no
// longer tracked, whether the scrub worked or not; each outcome has its
// log line.
func TestScrubUserdata(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := vctypes.Ref{Type: "VirtualMachine", Value: "vm-a"}
	b := vctypes.Ref{Type: "VirtualMachine", Value: "vm-b"}
	e.c.TrackUserdata("a", a)
	e.c.TrackUserdata("b", b)
	assert.Equal(t, map[string]vctypes.Ref{"a": a, "b": b}, e.c.Userdata())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.c.ScrubUserdata(ctx, a, "a", "spawn failed")
	assert.Equal(t, []error{nil}, e.port.ctxErr, "detached from the cancelled spawn")
	assert.Equal(t, []vctypes.ConfigChange{{Options: cloudinit.ScrubOptions()}}, e.port.scrubs)
	assert.NotEmpty(t, e.port.scrubs[0].Options)
	assert.Contains(t, e.logs.String(), `msg="worker userdata removed" vm=a detail="spawn failed"`)

	e.port.Fail("scrub", errors.New("boom"))
	e.c.ScrubUserdata(context.Background(), b, "b", "worker registered")
	assert.Contains(t, e.logs.String(), `level=WARN msg="remove worker userdata failed" vm=b detail="worker registered" err=boom`)
	assert.Equal(t, []string{"scrub vm-a", "scrub vm-b"}, e.port.List())
	assert.Empty(t, e.c.Userdata(), "a failed scrub is not retried: the vm keeps its token until destroyed")

	e.c.TrackUserdata("c", a)
	e.c.ForgetUserdata("c")
	assert.Empty(t, e.c.Userdata())
}

// TestAttempts: two template failures quarantine the key (WARN line, the
// sentence returned), a third attempt is refused with the quarantined
// code, and after the back-off a successful probe lifts it (INFO line
// naming what lifted it). A failure that is not the template's counts for
// nothing. It fails if the accounting were split from the book (a
// refusal without the code, or no line).
func TestAttempts(t *testing.T) {
	t.Parallel()
	clock := now0
	var mu sync.Mutex
	e := newEnv(t)
	e.c.Quarantine = quarantine.New(quarantine.Policy{Threshold: 2, BackoffBase: time.Minute, BackoffMax: time.Hour}, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	})
	ctx := context.Background()
	log := e.c.Log.With("vm", "w")
	tplErr := spawnfault.MarkTemplate(errors.New("guest never ready"))

	a, _, r := e.c.BeginAttempt("debian12")
	require.NotNil(t, a)
	require.Nil(t, r)
	_, detail := e.c.EndAttempt(ctx, a, log, "spawned", errors.New("not the template"))
	assert.Empty(t, detail)

	for i := 0; i < 2; i++ {
		a, _, r = e.c.BeginAttempt("debian12")
		require.NotNil(t, a, "attempt %d", i)
		cause, d := e.c.EndAttempt(ctx, a, log, "spawned", tplErr)
		assert.Equal(t, spawnfault.Template, cause)
		detail = d
	}
	assert.Equal(t, "debian12 quarantined until 2026-03-01T12:01:00Z after 2 consecutive failures", detail)
	assert.Contains(t, e.logs.String(), `level=WARN msg="template quarantined" vm=w reason=quarantined`)

	a, _, r = e.c.BeginAttempt("debian12")
	assert.Nil(t, a)
	require.NotNil(t, r)
	assert.Equal(t, refusal.ReasonQuarantined, r.Reason)
	assert.True(t, strings.HasPrefix(r.Detail, "debian12 quarantined until 2026-03-01T12:01:00Z after 2 consecutive failures (last: guest never ready)"), r.Detail)

	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	a, v, r := e.c.BeginAttempt("debian12")
	require.NotNil(t, a)
	require.Nil(t, r)
	assert.True(t, a.Probe())
	assert.Equal(t, "debian12", v.Entry.Key)
	_, _, r2 := e.c.BeginAttempt("debian12")
	require.NotNil(t, r2, "one probe at a time")
	assert.Contains(t, r2.Detail, "a probe spawn is in flight")
	_, detail = e.c.EndAttempt(ctx, a, log, "provisioned a pool vm", nil)
	assert.Empty(t, detail)
	assert.Contains(t, e.logs.String(), `level=INFO msg="template quarantine lifted" vm=w detail="debian12 provisioned a pool vm"`)
	assert.Empty(t, e.c.Quarantine.Quarantined())
}

// TestDeleteOnlyPoweredOffNeverStopsAWorker: a deletion decided on a VM the
// listing showed powered off never powers it off. vCenter refusing the
// destroy for the VM's power state (it was started since the listing: a
// spawn's power-on the listing had not shown) withdraws the deletion: no
// power off, no second destroy, the IP kept, the VM back to no entry (or
// to Started with its launch time), ErrWithdrawn. A VM listed running is
// refused before any call. Before OnlyPoweredOff, every deletion answered
// that refusal with a power off and a second destroy: a running worker's
// VM vanished mid-job (issue: demo --instances 2).
func TestDeleteOnlyPoweredOffNeverStopsAWorker(t *testing.T) {
	t.Parallel()
	badPower := &vctypes.Fault{Kind: vctypes.FaultInvalidPowerState, Err: errors.New("powered on")}

	e := newEnv(t)
	l, err := e.ips.Reserve(context.Background(), nil, "w-late")
	require.NoError(t, err)
	vm := ours("w-late", l.IP)
	vm.PowerState = "poweredOff" // as the lagging listing showed it
	e.port.Fail("destroy", badPower)
	err = e.c.Delete(context.Background(), vm, custody.OnlyPoweredOff)
	require.ErrorIs(t, err, custody.ErrWithdrawn)
	assert.Contains(t, err.Error(), `delete vm "w-late"`)
	assert.Equal(t, []string{"destroy vm-w-late"}, e.port.List(), "no power off, no second destroy")
	assert.Equal(t, lifecycle.Gone, phaseOf(t, e.life, "w-late"), "not marked: the next pass decides again")
	assert.NotEmpty(t, e.ips.Reserved(), "the running VM keeps its address")

	// A worker whose start could not be recorded keeps its launch time.
	e = newEnv(t)
	launched := now0.Add(-time.Minute)
	require.NoError(t, e.life.Move("w-started", lifecycle.Gone, lifecycle.Started, lifecycle.WithLaunched(launched)))
	vm = ours("w-started", "")
	vm.PowerState = "poweredOff"
	e.port.Fail("destroy", badPower)
	require.ErrorIs(t, e.c.Delete(context.Background(), vm, custody.OnlyPoweredOff), custody.ErrWithdrawn)
	got, ok := e.life.Get("w-started")
	require.True(t, ok)
	assert.Equal(t, lifecycle.Started, got.Phase)
	assert.Equal(t, launched, got.Launched)

	// Listed running: refused before any call, nothing moves.
	e = newEnv(t)
	require.ErrorIs(t, e.c.Delete(context.Background(), ours("w-on", ""), custody.OnlyPoweredOff), custody.ErrWithdrawn)
	assert.Empty(t, e.port.List())
	assert.Equal(t, lifecycle.Gone, phaseOf(t, e.life, "w-on"))

	// Still powered off: destroyed as usual, without a power off.
	e = newEnv(t)
	vm = ours("w-off", "")
	vm.PowerState = "poweredOff"
	require.NoError(t, e.c.Delete(context.Background(), vm, custody.OnlyPoweredOff))
	assert.Equal(t, []string{"destroy vm-w-off"}, e.port.List())
	assert.Equal(t, lifecycle.Destroyed, phaseOf(t, e.life, "w-off"))
}
