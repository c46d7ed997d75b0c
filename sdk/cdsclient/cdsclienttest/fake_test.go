package cdsclienttest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
)

// TestFakeJobs: a job read answers its status, holder and worker from the
// fields, the API's error for a gone job, and counts the reads; releases
// are recorded even when refused.
func TestFakeJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &cdsclienttest.Fake{Hatchery: "hatch-a", Region: "eu",
		JobStatus: map[string]string{"42": sdk.StatusBuilding}, JobWorker: map[string]string{"42": "w-1"},
		JobHolder: map[string]string{"run-x": "hatch-b"}, JobGone: map[string]bool{"43": true, "run-gone": true}}

	j, err := f.QueueJobInfo(ctx, 42)
	require.NoError(t, err)
	assert.Equal(t, sdk.StatusBuilding, j.Status)
	assert.Equal(t, "hatch-a", j.BookedBy.Name, "held by Hatchery by default")
	assert.Equal(t, "w-1", j.Job.WorkerName)
	_, err = f.QueueJobInfo(ctx, 43)
	assert.True(t, errors.Is(err, cdsclient.ErrForbidden), "a gone V1 job is the API's 403: %v", err)

	v2, err := f.V2QueueJobInfo(ctx, f.V2Region(), "run-x")
	require.NoError(t, err)
	assert.Equal(t, sdk.V2StatusScheduling, v2.RunJob.Status, "waiting for its worker")
	assert.Equal(t, "hatch-b", v2.RunJob.HatcheryName)
	_, err = f.V2QueueJobInfo(ctx, "eu", "run-gone")
	assert.True(t, errors.Is(err, cdsclient.ErrNotFound), "a gone V2 job is the API's 404: %v", err)
	assert.Equal(t, 1, f.Reads("42"))
	assert.Equal(t, 1, f.Reads("run-x"))

	f.Update(func(f *cdsclienttest.Fake) { f.ReleaseErr = errors.New("refused") })
	assert.Error(t, f.QueueJobRelease(ctx, 42))
	assert.Error(t, f.V2QueueJobRelease(ctx, "eu", "run-x"))
	assert.Equal(t, []string{"v1:42", "v2:eu:run-x"}, f.Released())
}

// TestFakeWorkersModelsAndRecords: the lists answer their fields, a V2
// worker added replaces one of its name, secrets are per model, and what
// the code sends is recorded in order.
func TestFakeWorkersModelsAndRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &cdsclienttest.Fake{Secrets: map[string][]sdk.WorkerModelSecret{"grp/m1": {{Name: "secrets.pw", Value: "v"}}}}
	f.AddV2Worker(sdk.V2Worker{Name: "w-1", Status: sdk.StatusWaiting})
	f.AddV2Worker(sdk.V2Worker{Name: "w-1", Status: sdk.StatusBuilding})
	f.AddV2Worker(sdk.V2Worker{Name: "w-2"})
	f.RemoveV2Worker("w-2")
	ws, err := f.V2WorkerList(ctx)
	require.NoError(t, err)
	assert.Equal(t, []sdk.V2Worker{{Name: "w-1", Status: sdk.StatusBuilding}}, ws)

	s, err := f.WorkerModelSecretList(ctx, "grp", "m1")
	require.NoError(t, err)
	assert.Len(t, s, 1)
	_, err = f.WorkerModelSecretList(ctx, "grp", "other")
	assert.Error(t, err)
	assert.Equal(t, 2, f.SecretReads())

	require.NoError(t, f.WorkerModelSpawnError(ctx, "grp", "m1", sdk.SpawnErrorForm{Error: "boom"}))
	assert.Equal(t, []string{"grp/m1: boom"}, f.SpawnErrors())
	require.NoError(t, f.QueueJobSendSpawnInfo(ctx, 42, []sdk.SpawnInfo{{}}))
	assert.Len(t, f.SpawnInfos(), 1)
	require.NoError(t, f.V2QueueJobSendInfo(ctx, "eu", "run-1", sdk.V2SendJobRunInfo{Message: "slow"}))
	require.NoError(t, f.WorkerDisable(ctx, "7"))
	assert.Equal(t, []string{"7"}, f.Disabled())
	infos, runs := f.JobInfos()
	assert.Equal(t, []string{"eu/run-1"}, runs)
	assert.Equal(t, "slow", infos[0].Message)
}

// TestFakeAllowIsStrict: with Allow set, a call not listed panics, and a
// method the fake does not implement always does.
func TestFakeAllowIsStrict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &cdsclienttest.Fake{Allow: []string{"WorkerList"}}
	_, err := f.WorkerList(ctx)
	assert.NoError(t, err)
	assert.PanicsWithValue(t, "cdsclienttest: unexpected call of V2WorkerList", func() { _, _ = f.V2WorkerList(ctx) })
	assert.Panics(t, func() { _ = (&cdsclienttest.Fake{}).SignIn(ctx) }, "not implemented")
}
