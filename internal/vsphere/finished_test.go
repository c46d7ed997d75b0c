package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
)

// TestFinishedVMLeftToItsSpawner: of two instances of one hatchery, the
// one whose record names it as the spawner destroys a finished worker's VM
// at its first pass; the other leaves it for two of its passes
// (othersGrace) from the first pass that found it finished, then destroys
// it itself: a VM whose spawner is gone does not leak. A VM created
// before this process started (its predecessor's, after a restart) is
// destroyed at once. The mock is strict: a destroy before the grace fails
// the test.
func TestFinishedVMLeftToItsSpawner(t *testing.T) {
	t.Parallel()
	// Created since this process started (warmNow): the other process
	// was running alongside it.
	mine := warmVM("w-mine", wOff, wCreated(-time.Second), wStarted(-2*time.Second))
	other := warmVM("w-other", wOff, wCreated(-time.Second), wStarted(-2*time.Second))
	other.Annotation.SpawnedBy = "an-other-process"
	// Created before this process started: maybe its predecessor's (a
	// restart), deleted at once as before.
	older := warmVM("w-older", wOff, wStarted(time.Hour))
	older.Annotation.SpawnedBy = "a-predecessor"
	cds := &cdsclienttest.Fake{V2Workers: []sdk.V2Worker{{Name: "w-mine"}, {Name: "w-other"}, {Name: "w-older"}}}
	e := newWarmEnv(t, warmConfig(), nil, cds)
	mine.Annotation.SpawnedBy = e.h.instance
	e.inv.Set(mine, other, older)
	clock := testutil.NewClock(warmNow)
	e.h.now = clock.Now
	grace := e.h.othersGrace()
	require.Equal(t, 4*time.Minute, grace, "two passes of the default killAwolServersInterval")

	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-mine")).Return(nil)
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-older")).Return(nil)
	e.h.killAwolServers(context.Background())
	e.ctrl.Finish() // w-other untouched so far

	clock.Advance(grace - time.Second)
	e.h.killAwolServers(context.Background())
	e.ctrl.Finish()

	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-other")).Return(nil)
	clock.Advance(time.Second)
	e.h.killAwolServers(context.Background())
	e.ctrl.Finish()
	// Once no listing shows it, its grace is forgotten.
	e.inv.Set(mine)
	e.h.killAwolServers(context.Background())
	e.h.othersMu.Lock()
	assert.Empty(t, e.h.othersFinished)
	e.h.othersMu.Unlock()
}

// TestInstanceIDsDiffer: each process draws its own name, so two
// instances started from one configuration tell their VMs apart.
func TestInstanceIDsDiffer(t *testing.T) {
	t.Parallel()
	a, b := newInstanceID(), newInstanceID()
	assert.Len(t, a, 12)
	assert.NotEqual(t, a, b)
}

// TestOthersGraceStartsAgainAfterAKeep: a VM of another process found
// ready to delete, then kept by a pass (its listing shows it running
// again), then ready again, gets a whole grace from the second finding:
// the grace covers passes in a row that found it ready.
func TestOthersGraceStartsAgainAfterAKeep(t *testing.T) {
	t.Parallel()
	finished := warmVM("w-other", wOff, wCreated(-time.Second), wStarted(-2*time.Second))
	finished.Annotation.SpawnedBy = "an-other-process"
	running := finished
	running.PowerState = vctypes.PoweredOn
	cds := &cdsclienttest.Fake{V2Workers: []sdk.V2Worker{{Name: "w-other"}}}
	e := newWarmEnv(t, warmConfig(), []inventory.VM{finished}, cds)
	clock := testutil.NewClock(warmNow)
	e.h.now = clock.Now
	grace := e.h.othersGrace()

	e.h.killAwolServers(context.Background()) // ready: the grace starts
	clock.Advance(grace / 2)
	e.inv.Set(running)
	e.h.killAwolServers(context.Background()) // kept: the grace is forgotten
	clock.Advance(grace / 2)
	e.inv.Set(finished)
	e.h.killAwolServers(context.Background()) // ready again: a new grace
	e.ctrl.Finish()                           // no destroy so far

	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs("w-other")).Return(nil)
	clock.Advance(grace)
	e.h.killAwolServers(context.Background())
}
