package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement/placementtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// serveCtl serves the daemon's ctl commands of t on a socket until the
// test ends; it returns the socket's path and the server's log.
func serveCtl(t *testing.T, target *ctlTarget) (string, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	dir, err := os.MkdirTemp("", "ctl") // short: a socket path holds 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := ctl.Listen(filepath.Join(dir, "ctl.sock"), ctl.Options{Commands: ctlCommands(target),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s.Path(), logs
}

// TestCtlPlacements: `placement list` shows every placement of the set
// (human and JSON: state, why, until, usage, headroom only when known,
// clones, datastores); cordon and uncordon change the set for the caller
// ("ctl uid N") and answer the placement as it is then, each logged once
// at INFO with the caller's uid while a list is logged at DEBUG; an unknown
// placement or a wrong command line is refused; without a set (no
// [[placements]]) list shows none and cordon is refused.
//
// Not parallel: a parallel test of this package waiting for the serial
// ones would count as a goroutine left behind by TestStartWithUnreachableVCenter.
func TestCtlPlacements(t *testing.T) {
	until := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	set := placementtest.NewPlacements(
		placement.Status{Name: "cluster-a", State: placement.StateActive, VMs: 3, CPUs: 6, MemoryMB: 12288,
			HeadroomCPUs: 10, HeadroomMemoryMB: 20480, TasksInFlight: 1, Clones: 5, CloneFailures: 1,
			Datastores: []placement.DatastoreStatus{{Name: "ds-a1", FreeBytes: 120 << 30, CapacityBytes: 500 << 30, FloorBytes: 50 << 30, Accessible: true}}},
		placement.Status{Name: "cluster-b", State: placement.StateBackingOff, Until: until, Reason: "datastore unavailable",
			HeadroomCPUs: placement.Unknown, HeadroomMemoryMB: placement.Unknown,
			Datastores: []placement.DatastoreStatus{{Name: "ds-b1", CapacityBytes: 200 << 30, FloorBytes: 20 << 30}}})
	sock, logs := serveCtl(t, &ctlTarget{placements: func() placement.Set { return set }})
	ctx := context.Background()
	do := func(args ...string) ctl.Response {
		t.Helper()
		r, err := ctl.Do(ctx, sock, ctl.Request{Command: "placement", Args: args})
		require.NoError(t, err)
		return r
	}

	r := do("list")
	require.True(t, r.OK, r.Error)
	assert.Regexp(t, `(?m)^NAME\s+STATE\s+VMS\s+VCPUS\s+MEMORY\s+HEADROOM\s+IN-FLIGHT\s+CLONES\s+FAILED\s+REASON$`, r.Text)
	assert.Regexp(t, `(?m)^cluster-a\s+active\s+3\s+6\s+12288 MB\s+10 vCPUs, 20480 MB\s+1\s+5\s+1\s+-$`, r.Text)
	assert.Regexp(t, `(?m)^cluster-b\s+backing-off until 2026-11-28T08:00:00Z\s+0\s+0\s+0 MB\s+-, -\s+0\s+0\s+0\s+datastore unavailable$`, r.Text)
	assert.Contains(t, r.Text, "datastores:\n  cluster-a ds-a1: 120/500 GB free, floor 50 GB\n  cluster-b ds-b1: inaccessible\n")
	var list []map[string]any
	require.NoError(t, json.Unmarshal(r.Data, &list))
	require.Len(t, list, 2)
	assert.Equal(t, "cluster-a", list[0]["name"])
	assert.Equal(t, 10.0, list[0]["headroom_vcpus"])
	assert.NotContains(t, list[1], "headroom_vcpus", "an unknown headroom is absent")
	assert.Equal(t, "2026-11-28T08:00:00Z", list[1]["until"])
	assert.NotContains(t, list[0], "until")
	ds := list[0]["datastores"].([]any)[0].(map[string]any)
	assert.Equal(t, float64(50<<30), ds["floor_bytes"])

	r = do("cordon", "cluster-a")
	require.True(t, r.OK, r.Error)
	assert.Equal(t, "placement cluster-a cordoned: no new clone goes there; its VMs run on and its idle warm-pool VMs are still claimed\n", r.Text)
	var p placementData
	require.NoError(t, json.Unmarshal(r.Data, &p))
	assert.Equal(t, "cordoned", p.State)
	uid := strconv.Itoa(os.Getuid())
	assert.Equal(t, []string{"ctl uid " + uid}, set.By())

	r = do("uncordon", "cluster-a")
	require.True(t, r.OK, r.Error)
	assert.Equal(t, "placement cluster-a uncordoned: it takes clones again\n", r.Text)
	assert.Equal(t, placement.StateActive, set.Statuses()[0].State)

	r = do("cordon", "nope")
	assert.False(t, r.OK)
	assert.Equal(t, `no placement "nope" (placements: cluster-a, cluster-b)`, r.Error)
	for _, args := range [][]string{nil, {"cordon"}, {"drain", "cluster-a"}, {"list", "x"}} {
		r = do(args...)
		assert.False(t, r.OK, args)
		assert.Equal(t, "usage: "+placementUsage, r.Error, args)
		assert.True(t, r.Usage, "a wrong request, not a refusal: %v", args)
	}

	l := logs.String()
	assert.Equal(t, 1, strings.Count(l, `level=INFO msg="ctl command" command="placement cordon cluster-a" peer_uid=`+uid), l)
	assert.Equal(t, 1, strings.Count(l, `level=INFO msg="ctl command" command="placement uncordon cluster-a" peer_uid=`+uid), l)
	assert.Equal(t, 1, strings.Count(l, `level=INFO msg="ctl command refused" command="placement cordon nope" peer_uid=`+uid), l)
	assert.Equal(t, 1, strings.Count(l, `level=DEBUG msg="ctl command" command="placement list" peer_uid=`+uid), l)
	assert.NotContains(t, l, "level=WARN")

	// No set yet.
	for _, target := range []*ctlTarget{{placements: func() placement.Set { return nil }}, {}} {
		sock, _ := serveCtl(t, target)
		r, err := ctl.Do(ctx, sock, ctl.Request{Command: "placement", Args: []string{"list"}})
		require.NoError(t, err)
		require.True(t, r.OK, r.Error)
		assert.Equal(t, "no [[placements]]: every clone goes to the top-level resource pool and datastore\n", r.Text)
		assert.JSONEq(t, "[]", string(r.Data))
		r, err = ctl.Do(ctx, sock, ctl.Request{Command: "placement", Args: []string{"cordon", "cluster-a"}})
		require.NoError(t, err)
		assert.False(t, r.OK)
		assert.Equal(t, `cordon placement "cluster-a": the configuration has no [[placements]]`, r.Error)
	}
}
