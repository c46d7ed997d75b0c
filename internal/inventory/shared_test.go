package inventory

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

func listedVM(name string) vctypes.VMInfo {
	return vctypes.VMInfo{Ref: vctypes.Ref{Type: "VirtualMachine", Value: name}, Name: name}
}

// runInventory runs inv's owner loop until the test ends (joined at
// cleanup) and returns the context it runs under.
func runInventory(t *testing.T, inv *Shared) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

func TestSharedInventoryServesSnapshotWithoutListingPerRead(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	var lists atomic.Int64
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(context.Context) ([]vctypes.VMInfo, error) {
		lists.Add(1)
		return []vctypes.VMInfo{listedVM("a"), listedVM("b")}, nil
	}).AnyTimes()

	inv := NewShared(vs, time.Hour, time.Millisecond, nil)
	ctx := runInventory(t, inv)

	for i := 0; i < 100; i++ {
		vms, err := inv.VMs(ctx)
		require.NoError(t, err)
		require.Len(t, vms, 2)
	}
	require.Equal(t, int64(1), lists.Load(), "100 reads after the first refresh must not list again")
}

func TestSharedInventoryInvalidateRefreshesAndCoalesces(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	var names atomic.Value
	names.Store([]string{"a"})
	var lists atomic.Int64
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(context.Context) ([]vctypes.VMInfo, error) {
		lists.Add(1)
		var out []vctypes.VMInfo
		for _, n := range names.Load().([]string) {
			out = append(out, listedVM(n))
		}
		return out, nil
	}).AnyTimes()

	inv := NewShared(vs, time.Hour, time.Millisecond, nil)
	ctx := runInventory(t, inv)

	_, err := inv.VMs(ctx)
	require.NoError(t, err)
	names.Store([]string{"a", "b"})
	for i := 0; i < 50; i++ {
		inv.Invalidate()
	}
	require.NoError(t, inv.WaitRefresh(ctx))
	vms, err := inv.VMs(ctx)
	require.NoError(t, err)
	require.Len(t, vms, 2, "the write is visible after a refresh")
	// 1 first refresh + at most a few for 50 invalidations and WaitRefresh.
	require.LessOrEqual(t, lists.Load(), int64(5), "invalidations coalesce")
}

func TestSharedInventoryStaleSnapshotIsRefused(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	var fail atomic.Bool
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(context.Context) ([]vctypes.VMInfo, error) {
		if fail.Load() {
			return nil, errors.New("vcenter down")
		}
		return []vctypes.VMInfo{listedVM("a")}, nil
	}).AnyTimes()

	inv := NewShared(vs, time.Minute, time.Millisecond, nil)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	inv.now = func() time.Time { return time.Unix(0, now.Load()) }
	ctx := runInventory(t, inv)

	_, err := inv.VMs(ctx)
	require.NoError(t, err)

	fail.Store(true)
	require.NoError(t, inv.WaitRefresh(ctx))
	vms, err := inv.VMs(ctx)
	require.NoError(t, err, "a recent snapshot is still served during a short outage")
	require.NoError(t, inv.Stats().Stale)
	require.Len(t, vms, 1)
	require.Error(t, inv.Stats().LastErr)

	now.Add(int64(5 * time.Minute))
	_, err = inv.VMs(ctx)
	require.ErrorIs(t, err, ErrStale, "an old snapshot is refused")
	require.Contains(t, err.Error(), "last refresh failed: vcenter down", "the error says why")
	require.ErrorIs(t, inv.Stats().Stale, ErrStale, "the status line reads the same verdict")

	fail.Store(false)
	require.NoError(t, inv.WaitRefresh(ctx))
	_, err = inv.VMs(ctx)
	require.NoError(t, err, "recovered after vCenter is back")
}

func TestSharedInventorySlowRefreshExtendsTheLimitByTheGraceOnly(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	var calls atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(ctx context.Context) ([]vctypes.VMInfo, error) {
		if calls.Add(1) == 2 { // the second refresh hangs until released
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []vctypes.VMInfo{listedVM("a")}, nil
	}).AnyTimes()

	inv := NewShared(vs, time.Minute, time.Millisecond, nil)
	var now atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(start.UnixNano())
	inv.now = func() time.Time { return time.Unix(0, now.Load()) }
	ctx := runInventory(t, inv)

	_, err := inv.VMs(ctx)
	require.NoError(t, err)
	inv.Invalidate()
	<-entered // refresh 2 started at `start` and is running

	now.Store(start.Add(4*time.Minute + 10*time.Second).UnixNano())
	_, err = inv.VMs(ctx)
	require.ErrorIs(t, err, ErrStale, "a refresh running for longer than the grace is an outage")
	require.Contains(t, err.Error(), "refresh running for 4m10s")

	// The same age with a refresh that started recently is served.
	inv.mu.Lock()
	inv.running = start.Add(4 * time.Minute)
	inv.mu.Unlock()
	_, err = inv.VMs(ctx)
	require.NoError(t, err, "a slow refresh within the grace keeps the snapshot")

	now.Store(start.Add(4*time.Minute + refreshGrace + time.Second).UnixNano())
	_, err = inv.VMs(ctx)
	require.ErrorIs(t, err, ErrStale, "past the grace the snapshot is refused")
	close(release)
}

// TestSharedInventoryRetryAfterAFailureGetsNoGrace: during an outage the
// failed refreshes follow one another, each kicked by an Invalidate; the
// one in flight must not extend the staleness limit (a busy machine made
// a failing refresh slow enough to be in flight at most reads, and the
// stale snapshot was served to spawns and provisioning).
func TestSharedInventoryRetryAfterAFailureGetsNoGrace(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	var calls atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	var inv *Shared
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(ctx context.Context) ([]vctypes.VMInfo, error) {
		switch calls.Add(1) {
		case 1:
			return []vctypes.VMInfo{listedVM("a")}, nil
		case 2: // fails, and the retry is asked for at once
			inv.Invalidate()
		case 3: // the retry after the failure hangs until released
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil, errors.New("vcenter down")
	}).AnyTimes()

	inv = NewShared(vs, time.Minute, time.Millisecond, nil)
	var now atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(start.UnixNano())
	inv.now = func() time.Time { return time.Unix(0, now.Load()) }
	ctx := runInventory(t, inv)

	_, err := inv.VMs(ctx)
	require.NoError(t, err)
	now.Store(start.Add(4*time.Minute + 10*time.Second).UnixNano())
	inv.Invalidate() // refresh 2 fails and asks for refresh 3
	<-entered        // refresh 3 started after refresh 2 failed, and runs
	inv.mu.RLock()
	running, lastErr := inv.running, inv.lastErr
	inv.mu.RUnlock()
	require.False(t, running.IsZero(), "a refresh is in flight")
	require.Error(t, lastErr, "the last refresh failed")

	_, err = inv.VMs(ctx)
	require.ErrorIs(t, err, ErrStale, "a retry in flight after a failure is no reason to serve an old snapshot")
	require.Contains(t, err.Error(), "last refresh failed: vcenter down")
	close(release)
}

func TestSharedInventoryFirstReadHonoursContext(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	inv := NewShared(vs, time.Minute, 0, nil) // never Run
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := inv.VMs(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestSharedInventorySyncedOnlyAfterASuccess(t *testing.T) {
	t.Parallel()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	var fail atomic.Bool
	fail.Store(true)
	vs.EXPECT().ListVirtualMachines(gomock.Any()).DoAndReturn(func(context.Context) ([]vctypes.VMInfo, error) {
		if fail.Load() {
			return nil, errors.New("not connected")
		}
		return []vctypes.VMInfo{listedVM("a")}, nil
	}).AnyTimes()
	inv := NewShared(vs, time.Hour, time.Millisecond, nil)
	ctx := runInventory(t, inv)

	require.NoError(t, inv.WaitRefresh(ctx))
	select {
	case <-inv.Synced():
		t.Fatal("synced after failed refreshes only")
	default:
	}
	fail.Store(false)
	inv.Invalidate()
	select {
	case <-inv.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced after a successful refresh")
	}
}
