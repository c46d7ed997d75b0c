package warmpool

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/poolsize"
)

// The pool's use of its demand (demand.go): the targets of the pools
// that follow demand, and what a shrink may remove. The clock is the
// env's testNow, moved by hand.

// demandEntry is a pool of debian12 pre-sized small, between 0 and max.
func demandEntry(max int) config.WorkerProvisioning {
	return config.WorkerProvisioning{ModelVMWare: "debian12", Flavor: "small", Max: max}
}

var smallKey = Key{Model: "debian12", Flavor: "small"}

// debianTemplate is the template the pool clones.
func debianTemplate() inventory.VM {
	return inventory.VM{Ref: refOf("debian12"), Name: "debian12", Template: true}
}

// demandEnv is a pool env whose configuration holds entries and whose
// pool follows demand; its log is kept.
func demandEnv(t *testing.T, vms []inventory.VM, entries ...config.WorkerProvisioning) (*poolEnv, *bytes.Buffer) {
	t.Helper()
	e := newPoolEnv(t, vms, false)
	e.p.Config.WorkerProvisioning = entries
	e.p.Demand = NewDemand()
	var buf bytes.Buffer
	e.p.Log = slog.New(slog.NewTextHandler(&buf, nil))
	e.p.Custody.Log = e.p.Log
	return e, &buf
}

// queueJobs has the pool see n jobs of debian12 small in the queue, ids
// from first.
func queueJobs(p *Pool, first, n int) {
	small := p.FlavorByName("small")
	for i := first; i < first+n; i++ {
		p.NoteArrival(v2Model("debian12"), small, fmt.Sprint(i))
	}
}

func targetOf(t *testing.T, p *Pool, vms []inventory.VM) int {
	t.Helper()
	targets, configured := p.provisioningTargets(context.Background(), vms)
	for _, tg := range targets {
		if tg.task.Key == smallKey {
			assert.Equal(t, tg.number, configured[smallKey])
			return tg.number
		}
	}
	return configured[smallKey]
}

// TestDemandTargetFollowsTheQueue: the jobs seen in the queue (each once,
// whatever the number of polls) raise the target, which is logged once
// with its reason; the status shows it; a fixed entry keeps its number.
func TestDemandTargetFollowsTheQueue(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{debianTemplate()}
	fixed := config.WorkerProvisioning{ModelVMWare: "debian12", Number: 2}
	e, log := demandEnv(t, vms, demandEntry(10), fixed)
	assert.Equal(t, []PoolStatus{
		{Key: Key{Model: "debian12"}, Target: 2, Reason: poolsize.ReasonFixed, Detail: "number 2"},
		{Key: smallKey, Demand: true, Target: 0, Reason: poolsize.ReasonMin, Detail: "no pass yet"},
	}, e.p.PoolStatus(), "before the first pass")
	assert.Equal(t, 0, targetOf(t, e.p, vms), "nothing seen, min 0")

	// Once polled, 4 jobs: 4 waiting now, and a burst of 4 in a quarter
	// hour where nothing was learnt, expected to go on for one refill.
	once, _ := demandEnv(t, vms, demandEntry(10))
	queueJobs(once.p, 1, 4)
	want := targetOf(t, once.p, vms)
	require.Equal(t, 4+poolsize.Size(4*float64(2*time.Minute+refillEstimate)/float64(poolsize.BucketWidth), config.DefaultPoolWarmShare), want)

	queueJobs(e.p, 1, 4)
	queueJobs(e.p, 1, 4) // the next poll shows the same jobs
	assert.Equal(t, want, targetOf(t, e.p, vms), "each job counts once")
	assert.Equal(t, 1, bytes.Count(log.Bytes(), []byte(fmt.Sprintf(`msg="warm pool target changed" model=debian12 flavor=small reason=queue detail="target %d:`, want))), log.String())
	assert.Equal(t, want, targetOf(t, e.p, vms), "the same target again")
	assert.Equal(t, 2, bytes.Count(log.Bytes(), []byte("warm pool target changed")), "one line per change (0, then the queue's)")

	st := e.p.PoolStatus()
	require.Len(t, st, 2)
	assert.Equal(t, PoolStatus{Key: Key{Model: "debian12"}, Target: 2, Reason: poolsize.ReasonFixed, Detail: "number 2", Since: testNow}, st[0])
	assert.Equal(t, smallKey, st[1].Key)
	assert.True(t, st[1].Demand)
	assert.Equal(t, want, st[1].Target)
	assert.Equal(t, poolsize.ReasonQueue, st[1].Reason)

	// Started jobs no longer wait; the hit ratio counts them.
	small := e.p.FlavorByName("small")
	e.p.NoteStart(v2Model("debian12"), small, "1", true)
	e.p.NoteStart(v2Model("debian12"), small, "2", false)
	targetOf(t, e.p, vms)
	st = e.p.PoolStatus()
	assert.InDelta(t, 0.5, st[1].HitRatio, 1e-9)
	assert.Equal(t, 2, st[1].Starts)
	assert.Equal(t, want, st[1].Target, "held: the need fell less than the idle period ago")
}

// TestDemandTargetCappedByMaxWorker: a pool never holds more ready VMs
// than the framework lets workers run at once.
func TestDemandTargetCappedByMaxWorker(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{debianTemplate()}
	e, _ := demandEnv(t, vms, demandEntry(10))
	e.p.Config.CommonConfiguration.Provision.MaxWorker = 3
	queueJobs(e.p, 1, 8)
	assert.Equal(t, 3, targetOf(t, e.p, vms))
	assert.Equal(t, poolsize.ReasonCapacity, e.p.PoolStatus()[0].Reason)
}

// TestTwoInstancesDoNotDoubleThePool: two instances of one hatchery see
// the same queue and decide the same target; their refills pick the same
// slot names (vCenter lets one clone of a name succeed), so the pool holds
// the target, not twice it. An instance that saw fewer jobs picks a subset
// of the other's names (the pool holds the larger target), and, finding
// the other's fresh VMs above its own target, removes none of them before
// they have waited the idle period (the strict mock fails on any removal).
func TestTwoInstancesDoNotDoubleThePool(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{debianTemplate()}
	a, _ := demandEnv(t, vms, demandEntry(10))
	b, _ := demandEnv(t, vms, demandEntry(10))
	queueJobs(a.p, 1, 5)
	queueJobs(b.p, 1, 5)
	ta, tb := targetOf(t, a.p, vms), targetOf(t, b.p, vms)
	require.GreaterOrEqual(t, ta, 5)
	require.Equal(t, ta, tb)
	namesA := a.p.freeSlots(smallKey, ta, ta, vms)
	namesB := b.p.freeSlots(smallKey, tb, tb, vms)
	assert.Equal(t, namesA, namesB, "the same slots")
	union := map[string]bool{}
	for _, n := range append(namesA, namesB...) {
		union[n] = true
	}
	assert.Len(t, union, ta, "the pool holds the target, not twice it")

	// c saw 3 of the jobs only: a subset of a's slots.
	c, _ := demandEnv(t, vms, demandEntry(10))
	queueJobs(c.p, 1, 3)
	tc := targetOf(t, c.p, vms)
	require.Less(t, tc, ta)
	assert.Equal(t, namesA[:tc], c.p.freeSlots(smallKey, tc, tc, vms))

	// a filled its slots; c's pass finds more than its target and
	// removes nothing: the VMs are fresh.
	filled := append([]inventory.VM{}, vms...)
	for _, n := range namesA {
		filled = append(filled, poolVM(n, "debian12", "small", time.Minute))
	}
	c.inv.Set(filled...)
	c.p.Provision(context.Background())
	for _, n := range namesA {
		_, tracked := c.p.Life.Get(n)
		assert.False(t, tracked, "%s left alone", n)
	}
}

// TestShrinkNeverDestroysAClaimedVM: the demand went away and the pool
// shrinks to 0. Of its three VMs, one is being claimed by a spawn of this
// process and one was claimed by another instance since the listing; only
// the idle one is removed: the claim in this process keeps the shrink off
// the first (the strict mock fails on any call on it), the claim's
// compare-and-swap in vCenter refuses the shrink the second (nothing but
// the compare-and-swap is sent: no power off, no destroy).
func TestShrinkNeverDestroysAClaimedVM(t *testing.T) {
	t.Parallel()
	idle := poolVM("warmpool-v2-idle", "debian12", "small", 3*time.Hour)
	other := poolVM("warmpool-v2-other", "debian12", "small", 2*time.Hour)
	mine := poolVM("warmpool-v2-mine", "debian12", "small", time.Hour)
	vms := []inventory.VM{debianTemplate(), idle, other, mine}
	entry := demandEntry(5)
	entry.IdleMinutes = 30
	e, log := demandEnv(t, vms, entry)
	_, err := e.p.Life.MoveFrom(mine.Name, lifecycle.Claimable(), lifecycle.Claimed, lifecycle.WithRef(mine.ObjectRef().Value), lifecycle.WithPool(smallKey.Pool()))
	require.NoError(t, err)
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs(idle.Name), casAt("cv-"+idle.Name)).Return(nil),
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), refIs(idle.Name)).Return(nil),
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs(other.Name), casAt("cv-"+other.Name)).Return(concurrentAccessFault(other.Name)),
	)
	e.p.Provision(context.Background())

	assert.Contains(t, log.String(), "reason=demand detail=\"target 0:")
	d, ok := e.p.Life.Get(idle.Name)
	require.True(t, ok)
	assert.Equal(t, lifecycle.Destroyed, d.Phase)
	_, ok = e.p.Life.Get(other.Name)
	assert.False(t, ok, "no mark on the other instance's worker")
	d, ok = e.p.Life.Get(mine.Name)
	require.True(t, ok)
	assert.Equal(t, lifecycle.Claimed, d.Phase, "the spawn's claim stands")
}

// TestDemandSurplusWaitsForTheIdlePeriod: a VM of a demand pool above
// the target goes only once it has waited idle the pool's idle period; a
// fixed pool's surplus goes at once.
func TestDemandSurplusWaitsForTheIdlePeriod(t *testing.T) {
	t.Parallel()
	fresh := poolVM("warmpool-v2-fresh", "debian12", "small", 10*time.Minute)
	aged := poolVM("warmpool-v2-aged", "debian12", "small", 40*time.Minute)
	idleFor := map[Key]time.Duration{smallKey: 30 * time.Minute}
	assert.False(t, idleLongEnough(fresh, idleFor, smallKey, testNow))
	assert.True(t, idleLongEnough(aged, idleFor, smallKey, testNow))
	assert.True(t, idleLongEnough(fresh, idleFor, Key{Model: "debian12"}, testNow), "a fixed pool")

	e, _ := demandEnv(t, nil, demandEntry(5))
	gomock.InOrder(
		e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), refIs(aged.Name), casAt("cv-"+aged.Name)).Return(nil),
		e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), refIs(aged.Name)).Return(nil),
	)
	e.p.removeSurplus(context.Background(), []inventory.VM{fresh, aged}, map[Key]int{smallKey: 2}, map[Key]int{smallKey: 0}, idleFor)
	_, ok := e.p.Life.Get(fresh.Name)
	assert.False(t, ok, "the fresh vm stays")
}

func TestJobPool(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Flavors: []config.Flavor{{Name: "small"}, {Name: "large"}}, WorkerProvisioning: []config.WorkerProvisioning{
		{ModelVMWare: "debian12", Flavor: "small", Max: 3}, {ModelVMWare: "debian12", Max: 2},
	}}
	k, ok := JobPool(cfg, v2Model("debian12"), cfg.FlavorNamed("small"))
	assert.True(t, ok)
	assert.Equal(t, smallKey, k)
	k, ok = JobPool(cfg, v2Model("debian12"), cfg.FlavorNamed("large"))
	assert.True(t, ok)
	assert.Equal(t, Key{Model: "debian12"}, k, "served by the neutral pool")
	_, ok = JobPool(cfg, v2Model("ubuntu"), nil)
	assert.False(t, ok)
}

// TestDemandEntryLiveOnReload: the pass reads the running configuration:
// an entry turned from a number into a demand entry (and back) is sized
// the new way at the next pass, with what the pool learnt kept.
func TestDemandEntryLiveOnReload(t *testing.T) {
	t.Parallel()
	vms := []inventory.VM{debianTemplate()}
	e, _ := demandEnv(t, vms)
	base := *e.p.Config
	running := base
	running.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: "debian12", Flavor: "small", Number: 2}}
	e.p.Live = func() *config.Config { return &running }

	queueJobs(e.p, 1, 6)
	assert.Equal(t, 2, targetOf(t, e.p, vms), "a fixed number")
	assert.Equal(t, poolsize.ReasonFixed, e.p.PoolStatus()[0].Reason)

	reloaded := base
	reloaded.WorkerProvisioning = []config.WorkerProvisioning{demandEntry(3)}
	running = reloaded
	assert.Equal(t, 3, targetOf(t, e.p, vms), "the queue's 6 jobs, max 3")
	assert.Equal(t, poolsize.ReasonMax, e.p.PoolStatus()[0].Reason)
}

// TestQueuedJobsStopCountingOnceGone: a job seen at every poll keeps
// counting as waiting; one that left the queue (taken by another
// instance) stops counting a minute after its last poll.
func TestQueuedJobsStopCountingOnceGone(t *testing.T) {
	t.Parallel()
	d := NewDemand()
	d.Arrive(smallKey, "stays", testNow)
	d.Arrive(smallKey, "leaves", testNow)
	for s := 20; s <= 120; s += 20 {
		d.Arrive(smallKey, "stays", testNow.Add(time.Duration(s)*time.Second))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Equal(t, 1, d.queued(smallKey, testNow.Add(2*time.Minute)))
	assert.Equal(t, 2, d.queued(smallKey, testNow.Add(50*time.Second)))
}
