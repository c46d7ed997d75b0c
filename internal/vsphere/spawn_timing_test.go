package vsphere

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
	"github.com/golang/mock/gomock"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// tmAPI is the CDS client of the timing tests: it records the infos
// posted on jobs (and the model spawn errors); any other call panics.
func tmAPI() *cdsclienttest.Fake {
	return &cdsclienttest.Fake{Region: "eu",
		Allow: []string{"WorkerModelSpawnError", "QueueJobSendSpawnInfo", "V2Region", "V2QueueJobSendInfo"}}
}

// expectTimedSpawn sets the calls of a guest-operations spawn by clone in
// which each vCenter step advances the clock: clone 50 s, guest operations
// and IP 20 s, env 5 s, launch 1 s.
func (f *spFixture) expectTimedSpawn(args spawn.Arguments) {
	tmpl := spRef("VirtualMachine", "vm-debian12")
	f.vs.EXPECT().LoadVirtualMachine(gomock.Any(), "debian12").Return(tmpl, nil)
	f.expectCloneSpecCalls(tmpl, 1)
	f.vs.EXPECT().LoadFolder(gomock.Any()).DoAndReturn(func(context.Context) (vctypes.Ref, error) {
		f.clock.Advance(300 * time.Millisecond) // the hatchery's own work before the clone
		return spFolderRef, nil
	})
	ref := spNewRef
	f.vs.EXPECT().CloneVirtualMachine(gomock.Any(), spClone{tmpl: tmpl, name: args.WorkerName}).
		DoAndReturn(func(context.Context, vctypes.Clone) (vctypes.Ref, error) {
			f.clock.Advance(50 * time.Second)
			return ref, nil
		})
	vm := spNewRef
	f.vs.EXPECT().WaitForGuestOperationsReady(gomock.Any(), vm).DoAndReturn(func(context.Context, vctypes.Ref) error {
		f.clock.Advance(15 * time.Second)
		return nil
	})
	f.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), vm, "").DoAndReturn(func(context.Context, vctypes.Ref, string) (string, error) {
		f.clock.Advance(5 * time.Second)
		return "10.0.0.10", nil
	})
	f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.EnvProgram}).
		DoAndReturn(func(context.Context, vctypes.Ref, *vctypes.GuestAuth, vctypes.GuestProgram) (int64, error) {
			f.clock.Advance(5 * time.Second)
			return 1, nil
		})
	f.vs.EXPECT().StartProgramInGuest(gomock.Any(), vm, gomock.Any(), spProgMatcher{guest.LaunchProgram}).
		DoAndReturn(func(context.Context, vctypes.Ref, *vctypes.GuestAuth, vctypes.GuestProgram) (int64, error) {
			f.clock.Advance(time.Second)
			return 2, nil
		})
	f.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), vm, gomock.Any()).Return(nil)
}

// histogram returns the histogram of family name whose labels include want.
func histogram(fams map[string]*dto.MetricFamily, name string, want labels) *dto.Histogram {
	if mt := findMetric(fams, name, want); mt != nil {
		return mt.GetHistogram()
	}
	return nil
}

// newTimedFixture is a spawn fixture with slowStartThreshold (seconds), a
// recording CDS client, the template debian12 and V2 arguments queued 30 s
// before they are booked, now.
func newTimedFixture(t *testing.T, threshold int) (*spFixture, *cdsclienttest.Fake, spawn.Arguments) {
	t.Helper()
	cfg := spConfig()
	cfg.SlowStartThreshold = threshold
	f := newSpFixture(t, cfg)
	cds := tmAPI()
	f.h.cds = cds
	f.h.pool.CDS = f.h.cds
	f.inv.Add(inventory.VM{Name: "debian12", Template: true})
	args := spV2Args()
	args.Booked = f.clock.Now()
	args.Queued = args.Booked.Add(-30 * time.Second)
	return f, cds, args
}

func TestSpawnTimingsServedLoggedAndReportedWhenSlow(t *testing.T) {
	t.Parallel()
	f, cds, args := newTimedFixture(t, 60)
	var logs testutil.SyncBuffer
	f.h.log = slog.New(slog.NewTextHandler(&logs, nil))
	f.h.pool.Log = f.h.log
	m, err := metrics.New(spHatchery)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	f.h.metrics = m
	f.expectTimedSpawn(args)

	require.NoError(t, f.h.SpawnWorker(context.Background(), args))

	fams := scrape(t, m)
	want := map[spawntiming.Stage]float64{
		spawntiming.StageQueueToBook: 30, spawntiming.StageBookToClone: 0.3, spawntiming.StageClone: 50,
		spawntiming.StageIP: 20, spawntiming.StageGuestReady: 5, spawntiming.StageLaunch: 1,
	}
	for _, s := range spawntiming.Stages {
		h := histogram(fams, "cds_hatchery_vsphere_spawn_stage_seconds", svc(spHatchery, "stage", string(s)))
		d, went := want[s]
		if !went {
			assert.Nil(t, h, "stage %s: the spawn did not go through it", s)
			continue
		}
		require.NotNil(t, h, "stage %s served", s)
		assert.Equal(t, uint64(1), h.GetSampleCount(), "stage %s", s)
		assert.InDelta(t, d, h.GetSampleSum(), 1e-6, "stage %s", s)
	}
	js := histogram(fams, "cds_hatchery_vsphere_job_start_seconds", svc(spHatchery, "worker_model", "my-model"))
	require.NotNil(t, js, "job start served by model")
	assert.Equal(t, uint64(1), js.GetSampleCount())
	assert.InDelta(t, 106.3, js.GetSampleSum(), 1e-6, "queued to worker launched")

	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `msg="spawn timings"`), "one line per spawn:\n%s", out)
	assert.Contains(t, out, `stages="queue_to_book=30s book_to_clone=300ms clone=50s ip=20s guest_ready=5s launch=1s"`)
	assert.Contains(t, out, "job_start=1m46.3s")
	assert.NotContains(t, out, "level=WARN")

	infos, runs := cds.JobInfos()
	require.Len(t, infos, 1, "slow start reported on the job")
	assert.Equal(t, []string{"eu/run-1"}, runs)
	assert.Equal(t, sdk.JobRunInfoLevelWarning, infos[0].Level)
	assert.Contains(t, infos[0].Message, "worker-v2-1 launched 1m46.3s after the job was queued")
	assert.Contains(t, infos[0].Message, "clone=50s")
	assert.NotContains(t, infos[0].Message, spSecret)
	assert.NotContains(t, infos[0].Message, "jwt-token")
}

func TestSpawnTimingsFastStartNotReported(t *testing.T) {
	t.Parallel()
	f, cds, args := newTimedFixture(t, 300)
	f.expectTimedSpawn(args)

	require.NoError(t, f.h.SpawnWorker(context.Background(), args))
	infos, _ := cds.JobInfos()
	assert.Empty(t, infos, "106.3 s is below the 300 s threshold")
	assert.Empty(t, cds.SpawnInfos())
}

func TestSpawnTimingsSlowV1StartPostsSpawnInfo(t *testing.T) {
	t.Parallel()
	f, cds, args := newTimedFixture(t, 60)
	args.JobID = "42"
	// No queue time: the spawn's own 81.3 s are compared.
	args.Queued = time.Time{}
	args.Model = sdk.WorkerStarterWorkerModel{
		ModelV1: &sdk.Model{Name: "debian", Group: &sdk.Group{Name: "shared.infra"}, Type: sdk.VSphere},
	}
	c := spawntiming.NewClock(f.h.now, time.Time{}, args.Booked)
	ctx := spawntiming.WithClock(context.Background(), c)
	f.clock.Advance(81300 * time.Millisecond)
	spawntiming.Mark(ctx, spawntiming.StageLaunch)
	f.h.timingReporter().Report(ctx, args, c)

	v1 := cds.SpawnInfos()
	require.Len(t, v1, 1)
	assert.Equal(t, spawntiming.MsgSpawnInfoWorkerForJob, v1[0].Message.ID)
	require.Len(t, v1[0].Message.Args, 1, "the one argument of the API's message")
	assert.Contains(t, v1[0].Message.Args[0], args.WorkerName+" (launched 1m21.3s after the job was booked")
	assert.Contains(t, v1[0].Message.Args[0], "launch=1m21.3s")
}
