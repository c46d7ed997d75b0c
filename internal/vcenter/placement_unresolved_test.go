package vcenter_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestAmbiguousDefaultPoolIsCachedWithBackoff: on a datacenter with a
// cluster and a standalone host (the VPX model), the default pool is
// ambiguous. The error names resourcePoolString and both candidates; it is
// logged once as an ERROR; until the retry, lookups answer it without a
// request (the simulator counts no walk of the hosts and clusters); the
// retry walks them once and doubles the back-off. Without the cache of
// failures every lookup walked them again (HostReads grew per call).
func TestAmbiguousDefaultPoolIsCachedWithBackoff(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testCtx(t)
	var logs testutil.SyncBuffer
	clock := testutil.NewClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	c := env.NewClient(func(c *vcenter.Config) {
		c.ResourcePool = ""
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	c.SetPlacementClock(clock.Now)

	before := env.HostReads()
	_, err := c.LoadResourcePool(ctx)
	require.Error(t, err)
	var pe *vcenter.PlacementError
	require.True(t, errors.As(err, &pe), "%v", err)
	assert.ErrorIs(t, err, vcenter.ErrAmbiguous)
	assert.ErrorIs(t, err, vctypes.ErrPlacementUnresolved)
	assert.Equal(t, "resourcePoolString", pe.Setting)
	assert.Contains(t, pe.Candidates, "/DC0/host/DC0_C0/Resources")
	assert.Contains(t, pe.Candidates, "/DC0/host/DC0_H0/Resources")
	assert.Contains(t, err.Error(), "set resourcePoolString to one of: ")
	t.Logf("%v", err)
	walks := env.HostReads() - before
	t.Logf("walks per lookup: %d", walks)
	require.Positive(t, walks, "the first lookup walks the hosts and clusters")

	for range 10 {
		_, again := c.LoadResourcePool(ctx)
		require.ErrorIs(t, again, vcenter.ErrAmbiguous)
		clock.Advance(5 * time.Second)
	}
	assert.Equal(t, before+walks, env.HostReads(), "no lookup before the retry")
	probs := c.PlacementProblems()
	require.Len(t, probs, 1)
	assert.Equal(t, "resourcePoolString", probs[0].Setting)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Contains(t, logs.String(), "setting=resourcePoolString")

	clock.Advance(vcenter.PlacementRetryMin)
	_, err = c.LoadResourcePool(ctx)
	require.ErrorIs(t, err, vcenter.ErrAmbiguous)
	assert.Equal(t, before+2*walks, env.HostReads(), "one lookup at the retry")
	clock.Advance(vcenter.PlacementRetryMin + time.Second)
	_, err = c.LoadResourcePool(ctx)
	require.ErrorIs(t, err, vcenter.ErrAmbiguous)
	assert.Equal(t, before+2*walks, env.HostReads(), "the back-off doubled: no lookup one minute later")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "a failure again is no new ERROR line")
}

// TestMissingPlacementListsWhatExists: a datastore, network, folder or pool
// that does not exist is a *PlacementError naming its setting and listing
// what exists, so that the operator sees what to write.
func TestMissingPlacementListsWhatExists(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testCtx(t)
	c := env.NewClient(func(c *vcenter.Config) { c.ResourcePool, c.Folder = "/DC0/host/nope/Resources", "/DC0/vm/nope" })

	check := func(err error, setting, existing string) {
		t.Helper()
		var pe *vcenter.PlacementError
		require.True(t, errors.As(err, &pe), "%v", err)
		assert.Equal(t, setting, pe.Setting)
		assert.False(t, pe.Ambiguous)
		assert.Contains(t, pe.Candidates, existing)
		assert.Contains(t, err.Error(), "existing: ")
	}
	_, err := c.LoadDatastore(ctx, "nope")
	check(err, "datastoreString", "/DC0/datastore/"+vcsimtest.DatastoreName)
	_, err = c.LoadResourcePool(ctx)
	check(err, "resourcePoolString", vcsimtest.ResourcePoolPath)
	_, err = c.LoadFolder(ctx)
	check(err, "folderString", "/DC0/vm/"+vcenter.LockFolderName)
	err = c.SetupEthernetCard(ctx, &types.VirtualEthernetCard{}, "vmxnet3", "nope")
	check(err, "networkString", "/DC0/network/"+vcsimtest.NetworkName)
	assert.Len(t, c.PlacementProblems(), 4)
}

// TestPlacementLookupReadsNamesOnly: at 1,000 VMs a resource pool lookup
// reads the names of what it walks, not whole hosts, clusters and pools
// (whose vm lists name every VM): govmomi's finder built with all = true
// read 840 KB for the ambiguous default pool and 621 KB for a configured
// path; the test fails above 128 KB and 64 KB. The figures are logged
// (go test -v -run TestPlacementLookupReadsNamesOnly ./internal/vcenter/).
func TestPlacementLookupReadsNamesOnly(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true, ForeignVMs: 1000})
	ctx := testCtx(t)

	c := env.NewClient(func(c *vcenter.Config) { c.ResourcePool = "" })
	before := c.Stats()
	_, err := c.LoadResourcePool(ctx)
	require.ErrorIs(t, err, vcenter.ErrAmbiguous)
	ambiguous := c.Stats().Sub(before).Total()
	t.Logf("ambiguous default pool, candidates listed: %+v", ambiguous)
	assert.Less(t, ambiguous.ResponseBytes, int64(128<<10))

	c = env.NewClient(nil)
	before = c.Stats()
	_, err = c.LoadResourcePool(ctx)
	require.NoError(t, err)
	configured := c.Stats().Sub(before).Total()
	t.Logf("configured pool path: %+v", configured)
	assert.Less(t, configured.ResponseBytes, int64(64<<10))
}
