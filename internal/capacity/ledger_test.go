package capacity

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	testLarge = Footprint{CPUs: 8, MemoryMB: 16384}
	testSmall = Footprint{CPUs: 2, MemoryMB: 4096}
	testT0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ledgerEnv drives one Ledger the way the hatchery does: Begin, read the
// inventory (vms; read, when set, runs at that moment), Decide, End.
type ledgerEnv struct {
	l     *Ledger
	now   time.Time
	grace time.Duration
	vms   []VMUsage
	read  func()
}

func newLedgerEnv(grace time.Duration) *ledgerEnv {
	return &ledgerEnv{l: NewLedger(), now: testT0, grace: grace}
}

// can decides for one worker of fp under key against maxCpus 16.
func (e *ledgerEnv) can(fp Footprint, key string) bool {
	return e.decide(fp, key).Decision.Allowed
}

func (e *ledgerEnv) decide(fp Footprint, key string) Outcome {
	g := e.l.Begin()
	defer e.l.End(g, e.now, e.grace)
	vms := append([]VMUsage(nil), e.vms...)
	if e.read != nil {
		e.read()
	}
	return e.l.Decide(g, e.now, e.grace, Count(vms), Input{MaxCPUs: 16, Next: fp, Known: true}, Reservation{Key: key})
}

// vm is a powered-on VM of this hatchery running key's worker.
func vm(key string, fp Footprint) VMUsage {
	return VMUsage{Name: "worker-" + key, JobID: key, CPUs: fp.CPUs, MemoryMB: fp.MemoryMB, PoweredOn: true, Owned: true}
}

func (e *ledgerEnv) release(key string) bool { return e.l.Release(key, e.now, e.grace) }

func TestLedgerLifecycle(t *testing.T) {
	t.Parallel()

	t.Run("release frees", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testLarge, "j2"))
		require.False(t, e.can(testLarge, "j3"))
		require.True(t, e.release("j1")) // spawn failed: no VM
		require.True(t, e.can(testLarge, "j3"))
		require.False(t, e.release("unknown-job"), "harmless")
		require.False(t, e.can(testLarge, "j4"))
	})

	t.Run("expiry frees", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testLarge, "j2"))
		e.now = e.now.Add(ReservationTTL - time.Second)
		require.False(t, e.can(testLarge, "j3"))
		e.now = e.now.Add(time.Second)
		o := e.decide(testLarge, "j3")
		require.True(t, o.Decision.Allowed)
		require.Len(t, o.Expired, 2)
		require.Equal(t, []string{"j1", "j2"}, []string{o.Expired[0].Key, o.Expired[1].Key})
		require.True(t, e.can(testLarge, "j4"))
		require.False(t, e.can(testLarge, "j5"))
	})

	t.Run("same key asked twice is reserved once", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testLarge, "j2"))
		require.False(t, e.can(testLarge, "j3"))
		n, fp := e.l.Held()
		require.Equal(t, 2, n)
		require.Equal(t, testLarge.Times(2), fp)
	})

	t.Run("visible powered-on VM is counted once", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, "j1"))
		off := vm("j1", testLarge)
		off.PoweredOn = false
		e.vms = []VMUsage{off} // cloned, not started: the reservation counts
		require.True(t, e.can(testLarge, "j2"))
		require.False(t, e.can(testSmall, "j3"), "8 (j1 reserved) + 8 (j2)")
		e.vms = []VMUsage{vm("j1", testLarge)} // powered on, not yet released
		o := e.decide(testSmall, "j3")
		require.False(t, o.Decision.Allowed)
		require.Equal(t, int64(16), o.Input.Used.CPUs, "j1 through its VM, j2 through its reservation")
		require.Equal(t, 1, o.Counted)
	})

	t.Run("release during a decision's inventory read is still counted", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testLarge, "j2"))
		// The snapshot is taken before j1's VM is there; j1 releases meanwhile.
		e.read = func() { e.release("j1") }
		require.False(t, e.can(testLarge, "j3"), "j1 released after the snapshot: still counted")
		e.read = nil
		e.vms = []VMUsage{vm("j1", testLarge)}
		require.False(t, e.can(testLarge, "j3"), "j1 counted through its VM")
		e.release("j2")
		require.True(t, e.can(testLarge, "j3"))
		require.Equal(t, 1, e.l.Len(), "released reservations are forgotten once no decision needs them")
	})

	t.Run("grace: a released spawn counts until its VM shows or the grace ends", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(time.Minute)
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testLarge, "j2"))
		e.release("j1")
		e.release("j2")
		n, _ := e.l.Held()
		require.Zero(t, n, "released: not held any more")
		require.False(t, e.can(testSmall, "j3"), "lagging snapshot: both still counted")
		e.vms = []VMUsage{vm("j1", testLarge)}
		require.False(t, e.can(testSmall, "j3"), "j1 once, through its VM")
		e.now = e.now.Add(time.Minute - time.Second)
		require.False(t, e.can(testSmall, "j3"), "j2 (failed, no VM) held within the grace")
		e.now = e.now.Add(time.Second)
		require.True(t, e.can(testLarge, "j3"), "and not after it")
		e.release("j3")
		e.now = e.now.Add(time.Minute)
		require.True(t, e.can(testLarge, "j4"))
		e.release("j4")
		e.now = e.now.Add(time.Minute)
		require.True(t, e.can(testSmall, "j5"))
		require.Equal(t, 1, e.l.Len(), "only j5's reservation is left")
	})

	t.Run("given back: forgotten at once, without grace", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(time.Hour)
		o := e.decide(testLarge, "j1")
		require.NotNil(t, o.Held)
		require.True(t, e.can(testLarge, "j2"))
		require.False(t, e.can(testLarge, "j3"))
		require.True(t, e.l.GiveBack(o.Held), "booking lost")
		require.False(t, e.l.GiveBack(o.Held), "once")
		require.True(t, e.can(testLarge, "j3"), "the same instant")
		require.True(t, e.release("j2"))
		require.False(t, e.l.GiveBack(o.Held))
	})

	t.Run("drop: a provisioned VM powered off holds nothing", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(time.Hour)
		require.True(t, e.can(testLarge, ProvisionKey("p1")))
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.l.Drop(ProvisionKey("p1")))
		require.False(t, e.l.Drop(ProvisionKey("p1")))
		require.True(t, e.can(testLarge, "j2"))
	})

	t.Run("a provisioning VM shown powered on counts through the VM", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, ProvisionKey("p1")))
		e.vms = []VMUsage{{Name: "p1", CPUs: 8, MemoryMB: 16384, PoweredOn: true, Owned: true, Provisioning: true}}
		o := e.decide(testLarge, "j1")
		require.True(t, o.Decision.Allowed)
		require.Equal(t, 0, o.Counted)
		require.Equal(t, int64(8), o.Input.Used.CPUs, "p1 once, through its VM")
	})

	t.Run("no key", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(0)
		require.True(t, e.can(testLarge, ""))
		require.True(t, e.can(testLarge, ""))
		require.False(t, e.can(testLarge, ""))
		e.release("")
		require.True(t, e.can(testLarge, ""))
	})

	t.Run("view reserves nothing", func(t *testing.T) {
		t.Parallel()
		e := newLedgerEnv(time.Minute)
		require.True(t, e.can(testLarge, "j1"))
		require.True(t, e.can(testSmall, "j2"))
		e.release("j2")
		g := e.l.Begin()
		v := e.l.View(g, e.now, e.grace, Count(nil))
		e.l.End(g, e.now, e.grace)
		require.Equal(t, testLarge.Add(testSmall), v.InFlight, "the tombstone within its grace counts")
		require.Equal(t, 1, v.Held)
		require.Equal(t, testLarge, v.HeldFootprint)
		require.Equal(t, 2, e.l.Len())
	})
}

// TestLedgerConcurrentDecisionsNeverOvershoot: 40 concurrent decisions for
// large (8 vCPUs) under maxCpus 16 allow exactly 2 (run with -race).
func TestLedgerConcurrentDecisionsNeverOvershoot(t *testing.T) {
	t.Parallel()
	e := newLedgerEnv(0)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			g := e.l.Begin()
			defer e.l.End(g, testT0, 0)
			o := e.l.Decide(g, testT0, 0, Count(nil), Input{MaxCPUs: 16, Next: testLarge, Known: true}, Reservation{Key: fmt.Sprintf("j%d", i)})
			if o.Decision.Allowed {
				allowed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, int32(2), allowed.Load())
	n, fp := e.l.Held()
	require.Equal(t, 2, n)
	require.Equal(t, testLarge.Times(2), fp)
}

// TestLedgerSpawnCountedOnceNeverZero follows one spawn through every
// moment a report can look at it, with a shared inventory's grace: it is
// counted exactly once in each, through its reservation or its VM.
func TestLedgerSpawnCountedOnceNeverZero(t *testing.T) {
	t.Parallel()
	e := newLedgerEnv(time.Minute)
	count := func(vms []VMUsage) int64 {
		g := e.l.Begin()
		defer e.l.End(g, e.now, e.grace)
		return e.l.View(g, e.now, e.grace, Count(vms)).InFlight.CPUs + Count(vms).CPUs
	}
	off := vm("j1", testLarge)
	off.PoweredOn = false
	on := vm("j1", testLarge)

	require.True(t, e.can(testLarge, "j1"))
	require.Equal(t, int64(8), count(nil), "in flight, no VM yet")
	require.Equal(t, int64(8), count([]VMUsage{off}), "cloned, powered off")

	// A decision began before the release and read its snapshot before
	// the VM was there.
	g := e.l.Begin()
	e.release("j1")
	require.Equal(t, int64(8), e.l.View(g, e.now, e.grace, Count(nil)).InFlight.CPUs, "a snapshot older than the release still counts it")
	e.l.End(g, e.now, e.grace)

	require.Equal(t, int64(8), count(nil), "released, lagging snapshot: within the grace")
	require.Equal(t, int64(8), count([]VMUsage{off}), "released, snapshot shows it still off: within the grace")
	require.Equal(t, int64(8), count([]VMUsage{on}), "released, VM shown: through the VM only")
	require.Equal(t, 0, e.l.Len(), "once a snapshot showed the VM the tombstone is forgotten")
	require.Equal(t, int64(0), count(nil), "later snapshots show the VM, or show it stopped")

	// Powered on and shown before its release: through the VM, then once
	// released too.
	require.True(t, e.can(testLarge, "j2"))
	on2 := vm("j2", testLarge)
	require.Equal(t, int64(8), count([]VMUsage{on2}), "shown, not released")
	e.release("j2")
	require.Equal(t, int64(8), count([]VMUsage{on2}), "shown, released")
}
