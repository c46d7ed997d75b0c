package warmpool

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/poolsize"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The learnt demand kept in vCenter (demand_store.go): the store is the
// env's mock_vsphere.MockPort (vctypes.Attributes), the clock a variable
// moved by hand.

// peakEntry is debian12 small following demand, looking 30 minutes ahead.
func peakEntry() config.WorkerProvisioning {
	e := demandEntry(20)
	e.AheadMinutes = 30
	return e
}

// storedEnv is a demand env whose store is its mock and whose clock is
// *now.
func storedEnv(t *testing.T, now *time.Time) (*poolEnv, *bytes.Buffer) {
	t.Helper()
	e, buf := demandEnv(t, []inventory.VM{debianTemplate()}, peakEntry())
	e.p.DemandStore = e.vs
	e.p.Now = func() time.Time { return *now }
	return e, buf
}

var smallAttr = DemandAttribute(testHatchery, smallKey)

// TestRestartedInstanceSizesFromTheStoredDemand: an instance learns a
// Monday 09:00 peak (20 jobs in a quarter hour) and writes it to its
// folder's attribute within the hour; a new instance a week later, reading
// that attribute at its first pass, grows the pool ahead of the peak at
// that pass, when an instance without the record (nothing stored) keeps
// the pool empty.
func TestRestartedInstanceSizesFromTheStoredDemand(t *testing.T) {
	t.Parallel()
	now := testNow // Sunday 12:00 UTC
	a, _ := storedEnv(t, &now)
	vms := []inventory.VM{debianTemplate()}
	var stored string
	a.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("", false, nil).Times(1)
	a.vs.EXPECT().SetFolderAttribute(gomock.Any(), smallAttr, gomock.Any()).DoAndReturn(func(_ context.Context, _, v string) error {
		stored = v
		return nil
	}).Times(1)

	assert.Equal(t, 0, targetOf(t, a.p, vms), "first pass: nothing stored, nothing learnt")
	monday9 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now = monday9
	queueJobs(a.p, 1, 20)
	now = monday9.Add(30 * time.Minute)
	targetOf(t, a.p, vms) // the 09:00 quarter is learnt; the hour since the read is up: written
	require.NotEmpty(t, stored)
	assert.LessOrEqual(t, len(stored), 2000, "one pool's record stays small")

	// A week later, five minutes before the peak: a restarted instance.
	now = monday9.Add(7*24*time.Hour - 5*time.Minute)
	b, blog := storedEnv(t, &now)
	b.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return(stored, true, nil).Times(1)
	got := targetOf(t, b.p, vms)
	assert.Greater(t, got, 0, "grown ahead of the peak at the first pass")
	st := b.p.PoolStatus()
	require.Len(t, st, 1)
	assert.Equal(t, poolsize.ReasonAhead, st[0].Reason, st[0].Detail)
	assert.Contains(t, blog.String(), `msg="warm pool learnt demand read" model=debian12 flavor=small`)

	fresh, _ := storedEnv(t, &now)
	fresh.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("", false, nil).Times(1)
	assert.Equal(t, 0, targetOf(t, fresh.p, vms), "without the record the peak is unknown")
}

// TestDemandStoreFailuresRetriedWithoutWarn: a failed read is retried at
// the first pass 5 minutes later, and the pool writes nothing until it
// was read (a write would replace the record with less); a failed write
// is retried the same way, once, and succeeds. Neither logs a WARN: a
// fault vCenter answered is one INFO line per attempt, a vCenter that
// does not answer is DEBUG (the client logs the outage).
func TestDemandStoreFailuresRetriedWithoutWarn(t *testing.T) {
	t.Parallel()
	now := testNow
	e, log := storedEnv(t, &now)
	vms := []inventory.VM{debianTemplate()}
	sysErr := &vctypes.Fault{Kind: vctypes.FaultSystemError, Err: errors.New("read folder attribute: system error")}
	noAnswer := &url.Error{Op: "Post", URL: "https://vcenter/sdk", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	gomock.InOrder(
		e.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("", false, sysErr),
		e.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("", false, nil),
		e.vs.EXPECT().SetFolderAttribute(gomock.Any(), smallAttr, gomock.Any()).Return(noAnswer),
		e.vs.EXPECT().SetFolderAttribute(gomock.Any(), smallAttr, gomock.Any()).Return(sysErr),
		e.vs.EXPECT().SetFolderAttribute(gomock.Any(), smallAttr, gomock.Any()).Return(nil),
	)
	pass := func(at time.Duration) {
		now = testNow.Add(at)
		targetOf(t, e.p, vms)
	}
	pass(0)                // read fails
	pass(time.Minute)      // not yet retried
	pass(5 * time.Minute)  // read: nothing stored
	pass(time.Hour)        // not an hour since the read: no write
	pass(65 * time.Minute) // write: vCenter does not answer
	pass(66 * time.Minute) // not yet retried
	pass(70 * time.Minute) // write: a fault
	pass(74 * time.Minute) // not yet retried
	pass(75 * time.Minute) // write succeeds
	pass(2 * time.Hour)    // the next write is due at 2h15
	out := log.String()
	assert.NotContains(t, out, "level=WARN")
	assert.Equal(t, 1, strings.Count(out, `level=INFO msg="warm pool learnt demand not read"`), out)
	assert.Equal(t, 1, strings.Count(out, `level=INFO msg="warm pool learnt demand not saved"`), "the fault at 1h10; the outage at 1h05 is DEBUG: %s", out)
	assert.Contains(t, out, "system error")
}

// TestDemandAttributeNames: one attribute per pool and hatchery.
func TestDemandAttributeNames(t *testing.T) {
	t.Parallel()
	a := DemandAttribute("hatch", smallKey)
	assert.Regexp(t, `^hatchery-vsphere\.demand\.hatch\.warmpool-v2-debian12-small-[0-9a-f]{6}$`, a)
	assert.NotEqual(t, a, DemandAttribute("other", smallKey))
	assert.NotEqual(t, a, DemandAttribute("hatch", Key{Model: "debian12"}))
	assert.NotEqual(t, a, DemandAttribute("hatch", Key{V1: true, Model: "debian12", Flavor: "small"}))
}

// TestSaveDemandAtStopWritesReadPoolsNow: a clean stop writes at once the
// record of every pool whose record was read, not waiting for its hour;
// a pool whose read failed is not written (it would replace the record
// with less).
func TestSaveDemandAtStopWritesReadPoolsNow(t *testing.T) {
	t.Parallel()
	now := testNow
	e, _ := storedEnv(t, &now)
	vms := []inventory.VM{debianTemplate()}
	e.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("", false, nil)
	targetOf(t, e.p, vms)
	queueJobs(e.p, 1, 3)
	now = now.Add(20 * time.Minute)
	targetOf(t, e.p, vms) // within the hour: no write
	var written string
	e.vs.EXPECT().SetFolderAttribute(gomock.Any(), smallAttr, gomock.Any()).DoAndReturn(func(_ context.Context, _, v string) error {
		written = v
		return nil
	}).Times(1)
	e.p.SaveDemand(context.Background())
	var back poolsize.Demand
	require.NoError(t, back.UnmarshalText([]byte(written)))
	assert.InDelta(t, 3, back.Expected(testNow.Truncate(poolsize.BucketWidth), testNow.Truncate(poolsize.BucketWidth).Add(poolsize.BucketWidth)), 0.01,
		"the quarter hour learnt since the start is in the record")

	unread, _ := storedEnv(t, &now)
	unread.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("", false, errors.New("vcenter gone"))
	targetOf(t, unread.p, vms)
	unread.p.SaveDemand(context.Background()) // no write expected: the strict mock fails on one
}

// TestUnreadableDemandRecordReplaced: a record this version cannot decode
// (edited by hand, or a later version's) is not read again and again: the
// pool starts learning and replaces it at its next write.
func TestUnreadableDemandRecordReplaced(t *testing.T) {
	t.Parallel()
	now := testNow
	e, log := storedEnv(t, &now)
	vms := []inventory.VM{debianTemplate()}
	e.vs.EXPECT().FolderAttribute(gomock.Any(), smallAttr).Return("not a record", true, nil).Times(1)
	e.vs.EXPECT().SetFolderAttribute(gomock.Any(), smallAttr, gomock.Any()).Return(nil).Times(1)
	targetOf(t, e.p, vms)
	now = now.Add(10 * time.Minute)
	targetOf(t, e.p, vms) // not read again
	now = now.Add(time.Hour)
	targetOf(t, e.p, vms) // written
	assert.Equal(t, 1, strings.Count(log.String(), `level=INFO msg="warm pool learnt demand unreadable"`), log.String())
	assert.NotContains(t, log.String(), "level=WARN")
}
