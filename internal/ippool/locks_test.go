package ippool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// fakeLocker is an in-memory lock store that keeps names unique, as
// vCenter keeps a folder's children's names. Several pools may share one
// (several instances on one vCenter).
type fakeLocker struct {
	mu      sync.Mutex
	next    int
	locks   map[string]vctypes.Ref
	creates int
	deletes int
	failAll error // every call fails with it when set
}

func newFakeLocker() *fakeLocker {
	return &fakeLocker{locks: map[string]vctypes.Ref{}}
}

func (f *fakeLocker) CreateLock(_ context.Context, name string) (vctypes.Ref, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return vctypes.Ref{}, f.failAll
	}
	f.creates++
	if _, ok := f.locks[name]; ok {
		return vctypes.Ref{}, fmt.Errorf("create lock %q: %w", name, vctypes.ErrLockTaken)
	}
	f.next++
	ref := vctypes.Ref{Type: "Folder", Value: fmt.Sprintf("group-%d", f.next)}
	f.locks[name] = ref
	return ref, nil
}

func (f *fakeLocker) ListLocks(_ context.Context, prefix string) (map[string]vctypes.Ref, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return nil, f.failAll
	}
	out := map[string]vctypes.Ref{}
	for n, r := range f.locks {
		if strings.HasPrefix(n, prefix) {
			out[n] = r
		}
	}
	return out, nil
}

func (f *fakeLocker) DeleteLock(_ context.Context, lock vctypes.Ref) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAll != nil {
		return f.failAll
	}
	f.deletes++
	for n, r := range f.locks {
		if r == lock {
			delete(f.locks, n)
		}
	}
	return nil
}

// put creates a lock directly (another holder, or a foreign object).
func (f *fakeLocker) put(name string) {
	_, _ = f.CreateLock(context.Background(), name)
}

func (f *fakeLocker) has(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.locks[name]
	return ok
}

func (f *fakeLocker) counts() (creates, deletes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.deletes
}

// lockedPool is a pool of .1 and .2 taking locks in l as hatchery "hatch".
func lockedPool(t *testing.T, l *fakeLocker) (*Pool, func(time.Duration)) {
	t.Helper()
	p, c := spPool(t, &config.Config{IPRange: "10.0.0.1/30"}) // .1 and .2
	p.UseLocks(l, "hatch", slog.New(slog.NewTextHandler(io.Discard, nil)))
	return p, c.Advance
}

func used(ips ...string) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, ip := range ips {
		m[netip.MustParseAddr(ip)] = true
	}
	return m
}

func TestIPLocksLostLockMovesOnToTheNextAddress(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	l.put("hatch-ip-10.0.0.1") // another instance holds .1
	p, _ := lockedPool(t, l)
	lease, err := p.Reserve(context.Background(), nil, "vm-a")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2", lease.IP, "the locked address is passed over")
	assert.True(t, l.has("hatch-ip-10.0.0.2"), "the address is taken through its lock")
	assert.Equal(t, []string{"10.0.0.2"}, p.Reserved(), "the lost address is not reserved")
	used, total := p.Counts(nil)
	assert.Equal(t, 2, used, "the address locked by another counts as used")
	assert.Equal(t, 2, total)
}

func TestIPLocksAllLockedIsNoIPAvailable(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	l.put("hatch-ip-10.0.0.1")
	l.put("hatch-ip-10.0.0.2")
	p, _ := lockedPool(t, l)
	_, err := p.Reserve(context.Background(), nil, "vm-a")
	require.ErrorIs(t, err, ErrNoIPAvailable)
	assert.Empty(t, p.Reserved())
	creates, _ := l.counts()
	assert.Equal(t, 4, creates, "two puts, one create per address")
	_, err = p.Reserve(context.Background(), nil, "vm-b")
	require.ErrorIs(t, err, ErrNoIPAvailable)
	creates, _ = l.counts()
	assert.Equal(t, 4, creates, "addresses known locked are not asked again")
	assert.False(t, p.Available(nil))
}

func TestIPLocksTwoPoolsOneStoreNeverShareAnAddress(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	a, _ := lockedPool(t, l)
	b, _ := lockedPool(t, l)
	ctx := context.Background()
	var wg sync.WaitGroup
	ips := make([]string, 4)
	errs := make([]error, 4)
	for i := range 4 {
		p := a
		if i%2 == 1 {
			p = b
		}
		wg.Go(func() {
			l, err := p.Reserve(ctx, nil, fmt.Sprintf("vm-%d", i))
			ips[i], errs[i] = l.IP, err
		})
	}
	wg.Wait()
	got := map[string]int{}
	for i := range 4 {
		if errs[i] != nil {
			require.ErrorIs(t, errs[i], ErrNoIPAvailable)
			continue
		}
		got[ips[i]]++
	}
	assert.Equal(t, map[string]int{"10.0.0.1": 1, "10.0.0.2": 1}, got, "each address handed out once across the two pools")
}

func TestIPLocksOwnReleasedLockIsReusedThenReconciled(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	p, advance := lockedPool(t, l)
	ctx := context.Background()
	first, err := p.Reserve(ctx, nil, "vm-a")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.1", first.IP)
	p.Release(first.IP, "vm-a")
	creates, _ := l.counts()
	require.Equal(t, 1, creates)

	again, err := p.Reserve(ctx, nil, "vm-b")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", again.IP)
	creates, deletes := l.counts()
	assert.Equal(t, 1, creates, "the lock this process holds is reused without a create")
	assert.Zero(t, deletes)

	// The VM of vm-b uses it: the reconcile keeps the lock.
	advance(time.Minute)
	require.NoError(t, p.Reconcile(ctx, used("10.0.0.1")))
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "a lock whose address a vm uses is kept")
	// Its VM is gone and its reservation released: deleted at once.
	p.Release(again.IP, "vm-b")
	require.NoError(t, p.Reconcile(ctx, nil))
	assert.False(t, l.has("hatch-ip-10.0.0.1"), "an own unused lock is deleted by the reconcile")
	held, taken := p.Locks()
	assert.Zero(t, held)
	assert.Zero(t, taken)
	third, err := p.Reserve(ctx, nil, "vm-c")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", third.IP, "the freed address is taken again")
	creates, _ = l.counts()
	assert.Equal(t, 2, creates, "through a new lock")
}

func TestIPLocksReservedAddressKeepsItsLock(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	p, _ := lockedPool(t, l)
	ctx := context.Background()
	_, err := p.Reserve(ctx, nil, "vm-a") // clone in flight: not listed yet
	require.NoError(t, err)
	require.NoError(t, p.Reconcile(ctx, nil))
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "a reservation in flight keeps its lock")
}

func TestIPLocksOldOwnLockIsTakenAgainThroughVCenter(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	p, advance := lockedPool(t, l)
	ctx := context.Background()
	a, err := p.Reserve(ctx, nil, "vm-a")
	require.NoError(t, err)
	p.Release(a.IP, "vm-a")
	advance(ReservationTTL) // no reconcile ran meanwhile
	b, err := p.Reserve(ctx, nil, "vm-b")
	require.NoError(t, err)
	assert.Equal(t, a.IP, b.IP)
	creates, deletes := l.counts()
	assert.Equal(t, 2, creates, "a lock created ReservationTTL ago is not trusted without a call")
	assert.Equal(t, 1, deletes, "the old lock is deleted first")
	assert.True(t, l.has("hatch-ip-10.0.0.1"))
}

func TestIPLocksOldOwnLockTakenOverByAnotherIsNotReused(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	p, advance := lockedPool(t, l)
	ctx := context.Background()
	a, err := p.Reserve(ctx, nil, "vm-a")
	require.NoError(t, err)
	p.Release(a.IP, "vm-a")
	// Another instance deleted the unused lock after its grace, and
	// created its own for the address.
	locks, err := l.ListLocks(ctx, "hatch-ip-")
	require.NoError(t, err)
	require.NoError(t, l.DeleteLock(ctx, locks["hatch-ip-10.0.0.1"]))
	l.put("hatch-ip-10.0.0.1")
	advance(ReservationTTL)

	b, err := p.Reserve(ctx, nil, "vm-b")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2", b.IP, "the address is the other instance's now")
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "deleting the old lock by reference leaves the other's new one")
}

func TestIPLocksCrashedInstanceLocksReconciledAfterTheGrace(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	// A crashed instance left its locks; their VMs are gone.
	l.put("hatch-ip-10.0.0.1")
	l.put("hatch-ip-10.0.0.2")
	// Objects of the folder that are not this hatchery's locks.
	l.put("hatch-ip-10.0.0.01")
	l.put("hatch-ip-not-an-address")
	l.put("other-ip-10.0.0.1")
	p, advance := lockedPool(t, l)
	ctx := context.Background()

	require.NoError(t, p.Reconcile(ctx, used("10.0.0.2"))) // .2 still used by a VM
	_, err := p.Reserve(ctx, nil, "vm-a")
	require.ErrorIs(t, err, ErrNoIPAvailable, "listed locks of another holder are taken")
	creates, _ := l.counts()

	advance(ForeignLockGrace - time.Second)
	require.NoError(t, p.Reconcile(ctx, nil)) // .2's VM destroyed now
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "not before the grace")
	advance(time.Second)
	require.NoError(t, p.Reconcile(ctx, nil))
	assert.False(t, l.has("hatch-ip-10.0.0.1"), "unused for the grace: deleted")
	assert.True(t, l.has("hatch-ip-10.0.0.2"), ".2 was used until a grace ago: its clock started later")
	for _, n := range []string{"hatch-ip-10.0.0.01", "hatch-ip-not-an-address", "other-ip-10.0.0.1"} {
		assert.True(t, l.has(n), "%s is not this hatchery's lock: never deleted", n)
	}
	after, _ := l.counts()
	assert.Equal(t, creates, after, "the reconcile creates nothing")

	lease, err := p.Reserve(ctx, nil, "vm-a")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", lease.IP, "the reconciled address is reused")
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "through a lock of its own")

	advance(ForeignLockGrace)
	require.NoError(t, p.Reconcile(ctx, used("10.0.0.1")))
	assert.False(t, l.has("hatch-ip-10.0.0.2"))
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "the own lock of a used address is kept")
}

func TestIPLocksForeignLockSeenUsedRestartsTheGrace(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	l.put("hatch-ip-10.0.0.1")
	p, advance := lockedPool(t, l)
	ctx := context.Background()
	require.NoError(t, p.Reconcile(ctx, nil))
	advance(ForeignLockGrace - time.Second)
	require.NoError(t, p.Reconcile(ctx, used("10.0.0.1"))) // the other instance's VM is listed now
	advance(time.Second)
	require.NoError(t, p.Reconcile(ctx, nil))
	assert.True(t, l.has("hatch-ip-10.0.0.1"), "seen used: the grace starts again")
	advance(ForeignLockGrace)
	require.NoError(t, p.Reconcile(ctx, nil))
	assert.False(t, l.has("hatch-ip-10.0.0.1"))
}

func TestIPLocksVCenterFailureIsAnErrorNotAnAddress(t *testing.T) {
	t.Parallel()
	l := newFakeLocker()
	p, _ := lockedPool(t, l)
	l.failAll = errors.New("vcenter not answering")
	_, err := p.Reserve(context.Background(), nil, "vm-a")
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNoIPAvailable)
	assert.Contains(t, err.Error(), "10.0.0.1")
	assert.Empty(t, p.Reserved(), "the reservation is dropped")
	require.Error(t, p.Reconcile(context.Background(), nil))
}

func TestIPLocksOffWithoutUseLocks(t *testing.T) {
	t.Parallel()
	p, _ := spPool(t, &config.Config{IPRange: "10.0.0.1/30"})
	_, err := p.Reserve(context.Background(), nil, "vm-a")
	require.NoError(t, err)
	require.NoError(t, p.Reconcile(context.Background(), nil), "no locks: nothing to reconcile")
	held, taken := p.Locks()
	assert.Zero(t, held+taken)
}

// The configuration bounds the hatchery's name with static IPs
// (config.MaxNameWithStaticIPs) so that the longest lock name fits
// vSphere's 80 characters. config writes the lock name's shape again (it
// cannot import this package, which imports it): this ties the two, so a
// change of LockPrefix fails here rather than creating names vCenter
// refuses.
func TestIPLockNameOfTheLongestNameFitsVSphere(t *testing.T) {
	t.Parallel()
	p, _ := spPool(t, &config.Config{IPRange: "10.0.0.1/30"})
	p.UseLocks(newFakeLocker(), strings.Repeat("h", config.MaxNameWithStaticIPs), nil)
	name := p.locks.lockName(netip.MustParseAddr("255.255.255.255"))
	assert.Len(t, name, 80, "the longest address's lock name, for the longest name the configuration accepts")
}
