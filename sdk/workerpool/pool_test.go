package workerpool

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

const testHatchery = "hatchery-test"

func newTestPool(api *cdsclienttest.Fake, limits Limits, started func() []string, logs *testutil.SyncBuffer) *Pool {
	return New(Config{
		HatcheryName: testHatchery,
		V1:           true,
		Limits:       limits,
		API:          api,
		Started:      func(context.Context) ([]string, error) { return started(), nil },
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
}

func TestInconsistentWorkersDisabled(t *testing.T) {
	t.Parallel()
	api := &cdsclienttest.Fake{V1Workers: []sdk.Worker{
		{ID: "1", Name: "ours-started", Status: sdk.StatusBuilding, HatcheryName: testHatchery},
		{ID: "2", Name: "ours-gone", Status: sdk.StatusWaiting, HatcheryName: testHatchery},
		{ID: "3", Name: "theirs", Status: sdk.StatusBuilding, HatcheryName: "other"},
		{ID: "4", Name: "ours-disabled", Status: sdk.StatusDisabled, HatcheryName: testHatchery},
	}}
	started := []string{"ours-started", "ours-not-registered", RegisterPrefix + "model-x"}
	logs := &testutil.SyncBuffer{}
	p := newTestPool(api, Limits{MaxWorker: 10, MaxConcurrentProvisioning: 10}, func() []string { return started }, logs)
	p.mu.Lock()
	p.inFlight["spawning"] = false // a spawn in flight
	p.mu.Unlock()
	_, err := p.Refresh(context.Background())
	require.NoError(t, err)
	pool := p.Workers()
	assert.Equal(t, []string{"2"}, api.Disabled())
	byName := map[string]Worker{}
	for _, w := range pool {
		byName[w.Name] = w
	}
	assert.Len(t, pool, 4)
	assert.Equal(t, sdk.StatusBuilding, byName["ours-started"].Status)
	assert.Equal(t, sdk.StatusPending, byName["ours-not-registered"].Status)
	assert.Equal(t, sdk.StatusRegistering, byName[RegisterPrefix+"model-x"].Status)
	assert.Equal(t, SourceStarting, byName["spawning"].Source)
	assert.Contains(t, logs.String(), `"vm":"ours-gone","detail":"inconsistent"`)

	// Disabled once, not at every pass.
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Len(t, api.Disabled(), 1)
}

// TestPoolReserveCountsAndEnds: a slot counts from Reserve; a released
// one frees at once; a spawned one keeps counting (as the hatchery's)
// until a refresh started after it covers it; every end calls SpawnEnded.
func TestPoolReserveCountsAndEnds(t *testing.T) {
	t.Parallel()
	api := &cdsclienttest.Fake{}
	var mu sync.Mutex
	var started []string
	ends := 0
	p := New(Config{
		HatcheryName: testHatchery,
		V1:           true,
		Limits:       Limits{MaxWorker: 2, MaxConcurrentProvisioning: 2},
		API:          api,
		Started: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), started...), nil
		},
		SpawnEnded: func() { mu.Lock(); ends++; mu.Unlock() },
		Logger:     slog.New(slog.NewTextHandler(&testutil.SyncBuffer{}, nil)),
	})

	_, r := p.Reserve("w0", false)
	require.NotNil(t, r, "no snapshot yet")
	assert.Equal(t, refusal.ReasonPoolUnknown, r.Reason)
	room, err := p.Refresh(context.Background())
	require.NoError(t, err)
	assert.True(t, room, "a job was refused before and one fits now")
	assert.Equal(t, uint64(1), p.Refreshes())

	a, r := p.Reserve("w1", false)
	require.Nil(t, r)
	b, r := p.Reserve("w2", false)
	require.Nil(t, r)
	assert.Equal(t, 2, p.SpawnsInFlight())
	_, r = p.Reserve("w3", false)
	require.NotNil(t, r)
	assert.Equal(t, refusal.ReasonMaxProvisioning, r.Reason, "two spawns in flight")

	a.Release()
	a.Release() // a second end does nothing
	assert.Equal(t, 1, p.SpawnsInFlight())
	b.Spawned()
	assert.Equal(t, 0, p.SpawnsInFlight())
	mu.Lock()
	assert.Equal(t, 2, ends, "one call per slot ended")
	mu.Unlock()
	assert.Equal(t, []Worker{{Name: "w2", Status: sdk.StatusPending, Source: SourceHatchery}}, p.Workers(),
		"the spawned worker counts until a later snapshot shows it")

	mu.Lock()
	started = []string{"w2", "other-started"}
	mu.Unlock()
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	_, r = p.Reserve("w4", false)
	require.NotNil(t, r)
	assert.Equal(t, refusal.ReasonMaxWorkers, r.Reason, "two workers started: the pool is full")
	assert.Len(t, p.Workers(), 2, "w2 is counted once, from the snapshot")
}

// TestPoolRegistrationLimits: -1 refuses every registration; otherwise
// registrations have their own count.
func TestPoolRegistrationLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		maxReg int
		want   []bool // admitted, per successive Reserve
	}{
		{"disabled", -1, []bool{false}},
		{"one at a time", 1, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(&cdsclienttest.Fake{}, Limits{MaxConcurrentProvisioning: 1, MaxConcurrentRegistering: tc.maxReg},
				func() []string { return nil }, &testutil.SyncBuffer{})
			_, err := p.Refresh(context.Background())
			require.NoError(t, err)
			for i, want := range tc.want {
				s, r := p.Reserve(RegisterPrefix+"m", true)
				assert.Equal(t, want, s != nil, "reserve %d", i)
				if !want {
					require.NotNil(t, r)
					assert.Equal(t, refusal.ReasonMaxRegistering, r.Reason)
				}
			}
			_, r := p.Reserve("job-worker", false)
			assert.Nil(t, r, "a job spawn does not count against registrations")
		})
	}
}

// TestPoolRefreshErrorKeepsSnapshot: a failed refresh names what failed,
// wraps the cause and installs nothing.
func TestPoolRefreshErrorKeepsSnapshot(t *testing.T) {
	t.Parallel()
	notReady := errors.New("backend not ready")
	p := New(Config{
		HatcheryName: testHatchery, V1: true, API: &cdsclienttest.Fake{},
		Limits:  Limits{MaxConcurrentProvisioning: 1},
		Started: func(context.Context) ([]string, error) { return nil, notReady },
		Logger:  slog.New(slog.NewTextHandler(&testutil.SyncBuffer{}, nil)),
	})
	_, err := p.Refresh(context.Background())
	require.ErrorIs(t, err, notReady)
	assert.Contains(t, err.Error(), "list started workers")
	assert.Zero(t, p.Refreshes())
	_, r := p.Reserve("w", false)
	require.NotNil(t, r)
	assert.Equal(t, refusal.ReasonPoolUnknown, r.Reason)
}

// newGracePool is newTestPool with an unknown-worker grace of a minute on
// clock.
func newGracePool(api *cdsclienttest.Fake, started func() []string, logs *testutil.SyncBuffer, clock *testutil.Clock) *Pool {
	return New(Config{
		HatcheryName: testHatchery,
		V1:           true,
		Limits:       Limits{MaxWorker: 10, MaxConcurrentProvisioning: 10},
		API:          api,
		Started:      func(context.Context) ([]string, error) { return started(), nil },
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:          clock.Now,
		UnknownGrace: time.Minute,
	})
}

// TestUnknownWorkerInconsistentAfterGrace: a worker the API lists under
// this hatchery's name that the hatchery does not know is first taken for
// another instance's worker whose VM is not listed yet (debug, neither
// disabled nor warned about); still unknown a grace later, it is
// inconsistent and disabled, once.
func TestUnknownWorkerInconsistentAfterGrace(t *testing.T) {
	t.Parallel()
	api := &cdsclienttest.Fake{V1Workers: []sdk.Worker{{ID: "2", Name: "ours-gone", Status: sdk.StatusWaiting, HatcheryName: testHatchery}}}
	logs := &testutil.SyncBuffer{}
	clock := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := newGracePool(api, func() []string { return nil }, logs, clock)

	_, err := p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Empty(t, api.Disabled(), "disabled within the grace")
	assert.NotContains(t, logs.String(), `"detail":"inconsistent"`)
	assert.Contains(t, logs.String(), `"level":"DEBUG","msg":"worker registered under this hatchery's name, its VM not listed yet","vm":"ours-gone"`)
	assert.Empty(t, p.Workers(), "not counted while unknown")

	clock.Advance(time.Minute)
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"2"}, api.Disabled())
	assert.Contains(t, logs.String(), `"vm":"ours-gone","detail":"inconsistent"`)

	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Len(t, api.Disabled(), 1, "disabled once")
}

// TestUnknownWorkerListedWithinGraceIsNotDisabled: a worker the API lists
// under this hatchery's name before the hatchery lists its VM (started by
// another instance of the same name) is left alone once the listing shows
// it, however long that took within the grace, and then counts.
func TestUnknownWorkerListedWithinGraceIsNotDisabled(t *testing.T) {
	t.Parallel()
	api := &cdsclienttest.Fake{V1Workers: []sdk.Worker{{ID: "7", Name: "other-instances", Status: sdk.StatusBuilding, HatcheryName: testHatchery}}}
	logs := &testutil.SyncBuffer{}
	clock := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var started []string
	p := newGracePool(api, func() []string { mu.Lock(); defer mu.Unlock(); return started }, logs, clock)

	_, err := p.Refresh(context.Background())
	require.NoError(t, err)
	clock.Advance(59 * time.Second)
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	mu.Lock()
	started = []string{"other-instances"} // its VM listed now
	mu.Unlock()
	clock.Advance(time.Hour)
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Empty(t, api.Disabled())
	assert.NotContains(t, logs.String(), `"detail":"inconsistent"`)
	pool := p.Workers()
	require.Len(t, pool, 1)
	assert.Equal(t, "other-instances", pool[0].Name)
	assert.Equal(t, sdk.StatusBuilding, pool[0].Status)
}

// TestV2InconsistentWorkerReportedOnce: a V2 worker the API keeps listing
// under this hatchery's name after its VM was destroyed (it died without
// signing off) is reported once, at Info (no WARN in a healthy run), and
// at Debug at the refreshes after, as the V1 path disables such a worker
// once; a V2 worker whose VM this hatchery never listed is reported once
// at Warn. A worker the API forgets and lists again is reported again.
func TestV2InconsistentWorkerReportedOnce(t *testing.T) {
	t.Parallel()
	api := &cdsclienttest.Fake{V2Workers: []sdk.V2Worker{
		{ID: "a", Name: "ours-died", Status: sdk.StatusBuilding, HatcheryName: testHatchery},
		{ID: "b", Name: "never-ours", Status: sdk.StatusWaiting, HatcheryName: testHatchery},
	}}
	logs := &testutil.SyncBuffer{}
	var mu sync.Mutex
	started := []string{"ours-died"}
	p := New(Config{
		HatcheryName: testHatchery,
		V2:           true,
		Limits:       Limits{MaxWorker: 10, MaxConcurrentProvisioning: 10},
		API:          api,
		Started: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), started...), nil
		},
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	_, err := p.Refresh(context.Background())
	require.NoError(t, err)
	mu.Lock()
	started = nil // its VM destroyed, the worker still listed
	mu.Unlock()
	for i := 0; i < 5; i++ {
		_, err = p.Refresh(context.Background())
		require.NoError(t, err)
	}
	const msg = `"msg":"v2 worker registered but not started by this hatchery"`
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `"level":"INFO",`+msg+`,"vm":"ours-died"`), out)
	assert.Equal(t, 1, strings.Count(out, `"level":"WARN",`+msg+`,"vm":"never-ours"`), out)
	assert.Equal(t, 2, strings.Count(out, msg), "one report per worker, not one per refresh:\n%s", out)
	assert.Equal(t, 1, strings.Count(out, `"level":"WARN"`), out)
	assert.Contains(t, out, `"level":"DEBUG","msg":"v2 worker registered but not started by this hatchery, still listed","vm":"ours-died"`)
	assert.Empty(t, p.Workers(), "neither counts in the pool")

	// The API forgets never-ours, then lists it again: reported again.
	var saved []sdk.V2Worker
	api.Update(func(f *cdsclienttest.Fake) { saved = f.V2Workers; f.V2Workers = saved[:1] })
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	api.Update(func(f *cdsclienttest.Fake) { f.V2Workers = saved })
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(logs.String(), `"level":"WARN",`+msg+`,"vm":"never-ours"`))
}

// TestV1WorkerOfDestroyedVMDisabledAtInfo: a V1 worker whose VM this
// hatchery listed before and destroyed, still listed by the API, is
// disabled once with an Info line, not a WARN: it is this hatchery's own
// worker that did not sign off.
func TestV1WorkerOfDestroyedVMDisabledAtInfo(t *testing.T) {
	t.Parallel()
	api := &cdsclienttest.Fake{V1Workers: []sdk.Worker{{ID: "9", Name: "ours-died", Status: sdk.StatusBuilding, HatcheryName: testHatchery}}}
	logs := &testutil.SyncBuffer{}
	var mu sync.Mutex
	started := []string{"ours-died"}
	p := newTestPool(api, Limits{MaxWorker: 10, MaxConcurrentProvisioning: 10}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), started...)
	}, logs)
	_, err := p.Refresh(context.Background())
	require.NoError(t, err)
	mu.Lock()
	started = nil
	mu.Unlock()
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	_, err = p.Refresh(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"9"}, api.Disabled())
	assert.Contains(t, logs.String(), `"level":"INFO","msg":"disabling worker registered but not started by this hatchery","vm":"ours-died"`)
	assert.NotContains(t, logs.String(), `"level":"WARN"`)
}
