package vsphere_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// sqJob is what the test knows of one job's race between the hatcheries:
// each step is signalled once.
type sqJob struct {
	decided  map[string]chan struct{} // per hatchery: its admission decided
	spawning chan struct{}            // the winner entered SpawnWorker
	spawned  chan struct{}            // the winner's SpawnWorker returned
	released chan struct{}            // the loser gave its reservation back
	once     map[string]*sync.Once
}

// sqRace coordinates the two hatcheries job by job: both decide on a job
// before either books it, then the job's designated winner books first
// (the model's name says which: "sq-<hatchery>"), so the loser always
// loses the booking after its admission — the routine case of hatcheries
// sharing a queue, made deterministic.
type sqRace struct {
	mu    sync.Mutex
	jobs  map[string]*sqJob
	names []string

	// measured
	entryReserved []string // decisions that began with a footprint still reserved
	refusals      []string // capacity refusals by the hatcheries
}

func (r *sqRace) job(id string) *sqJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.jobs[id]
	if !ok {
		j = &sqJob{decided: map[string]chan struct{}{}, spawning: make(chan struct{}), spawned: make(chan struct{}),
			released: make(chan struct{}), once: map[string]*sync.Once{}}
		for _, n := range r.names {
			j.decided[n] = make(chan struct{})
		}
		for _, k := range []string{"spawning", "spawned", "released"} {
			j.once[k] = &sync.Once{}
		}
		r.jobs[id] = j
	}
	return j
}

func (j *sqJob) fire(k string, ch chan struct{}) { j.once[k].Do(func() { close(ch) }) }

func (r *sqRace) record(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
}

// sqHatchery is the real vSphere hatchery with the race's hooks around
// AllocateResources and SpawnWorker.
type sqHatchery struct {
	*vsphere.HatcheryVSphere
	race *sqRace
}

var _ hatchery.ResourceAllocator = (*sqHatchery)(nil)

func (h *sqHatchery) AllocateResources(ctx context.Context, model sdk.WorkerStarterWorkerModel, jobID string, reqs []sdk.Requirement) (spawn.Reservation, error) {
	name := h.Name()
	// Jobs are queued one at a time: a decision must find nothing reserved.
	if n, cpus, mem := h.ReservedFootprint(); n != 0 {
		h.race.record(&h.race.entryReserved, fmt.Sprintf("%s job %s: %d reservations, %d cpus, %d MB", name, jobID, n, cpus, mem))
	}
	res, err := h.HatcheryVSphere.AllocateResources(ctx, model, jobID, reqs)
	var ref *refusal.Refusal
	if errors.As(err, &ref) && ref.Reason.Waits() {
		h.race.record(&h.race.refusals, fmt.Sprintf("%s job %s: %v", name, jobID, err))
	}
	j := h.race.job(jobID)
	close(j.decided[name])
	winner := model.GetName() == "sq-"+name
	var wait <-chan struct{}
	if winner {
		for n, ch := range j.decided { // the other decides before anyone books
			if n != name {
				wait = ch
			}
		}
	} else {
		wait = j.spawning // the winner has taken the job
	}
	select {
	case <-wait:
	case <-ctx.Done():
	}
	if res == nil {
		return nil, err
	}
	return &sqReservation{Reservation: res, done: func() { j.fire("released", j.released) }}, err
}

func (h *sqHatchery) SpawnWorker(ctx context.Context, args spawn.Arguments) error {
	j := h.race.job(args.JobID)
	j.fire("spawning", j.spawning)
	defer j.fire("spawned", j.spawned)
	return h.HatcheryVSphere.SpawnWorker(ctx, args)
}

// sqReservation signals the release of a reservation once it is done.
type sqReservation struct {
	spawn.Reservation
	done func()
}

func (r *sqReservation) Release(why refusal.Reason) {
	r.Reservation.Release(why)
	r.done()
}

// sqSkips records the framework's refusal codes.
type sqSkips struct {
	hatchery.NopObserver
	mu    sync.Mutex
	codes []string
}

func (o *sqSkips) JobSkipped(reason refusal.Reason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.codes = append(o.codes, string(reason))
}

func (o *sqSkips) got() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.codes...)
}

// TestVcsimTwoHatcheriesShareQueue: two hatcheries (different names) on one
// CDS queue and one vCenter. Both admit every job before either books it;
// one wins the booking and spawns, the other loses it. The loser's
// reserved footprint is back to zero as soon as its booking failed (its
// next decision finds nothing reserved), and neither refuses a job for
// capacity although each has room for one more worker than it runs. With
// the footprint of lost bookings kept until capacity.ReservationTTL, each
// hatchery would count every job of the queue and refuse from job
// maxCpus/2 on.
func TestVcsimTwoHatcheriesShareQueue(t *testing.T) {
	t.Parallel()
	const (
		jobs      = 6
		perWinner = jobs / 2
		smallCPUs = 2 // viFlavors' small
	)
	env := vcsimtest.Start(t, vcsimtest.Options{})
	viSetPool(env, 1<<40, 1<<20) // the pool never limits: maxCpus does
	ctx, cancel := context.WithTimeout(env.Context(), 150*time.Second)
	defer cancel()
	sim := cdssim.Start(t, cdssim.Options{CDN: &sdk.CDNConfig{HTTPURL: "http://cdn.test"}})

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	pub, err := hatchery.PublicKeyPEM(key)
	require.NoError(t, err)

	names := []string{"hatch-sq-a", "hatch-sq-b"}
	race := &sqRace{jobs: map[string]*sqJob{}, names: names}
	hs := map[string]*sqHatchery{}
	skips := map[string]*sqSkips{}
	logs := map[string]*testutil.SyncBuffer{}
	invs := map[string]inventory.Inventory{}
	var runs sync.WaitGroup
	runCtx, stopRuns := context.WithCancel(ctx)
	defer func() { stopRuns(); runs.Wait() }()
	for i, name := range names {
		cfg := env.Config()
		cc := hatchery.DefaultCommonConfiguration()
		cc.Name = name
		cc.RSAPrivateKey = keyPEM
		cc.HTTP = hatchery.HTTPConfig{Addr: "127.0.0.1", Port: 0}
		cc.API.HTTP.URL = sim.URL()
		cc.API.TokenV2 = sim.TokenV2()
		cc.API.RequestTimeout = 5
		cc.Provision.MaxConcurrentProvisioning = jobs // workers never register here: all stay pending
		cfg.CommonConfiguration = cc
		cfg.Flavors = viFlavors()
		cfg.DefaultFlavor = "small"
		cfg.MaxCPUs = (perWinner + 1) * smallCPUs // room for one more than it will run
		cfg.IPRange = fmt.Sprintf("10.78.%d.10/24", i)
		cfg.Gateway, cfg.SubnetMask, cfg.DNS = fmt.Sprintf("10.78.%d.1", i), "255.255.255.0", fmt.Sprintf("10.78.%d.2", i)
		inv := env.Inventory(cfg) // run by env until the test ends
		invs[name] = inv
		logs[name] = &testutil.SyncBuffer{}
		log := slog.New(slog.NewJSONHandler(logs[name], &slog.HandlerOptions{Level: slog.LevelDebug}))
		vh, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, Inventory: inv, Logger: log})
		require.NoError(t, err)
		hs[name] = &sqHatchery{HatcheryVSphere: vh, race: race}
		skips[name] = &sqSkips{}
		client, err := cdsclient.New(cdsclient.Config{
			APIURL: sim.URL(), TokenV2: cc.API.TokenV2, RequestTimeout: 5 * time.Second, ServiceName: name,
			PublicKey: pub, Version: "test", Logger: log,
		})
		require.NoError(t, err)
		fw, err := hatchery.New(hatchery.Options{
			Config: cc, Hatchery: hs[name], Client: client, Logger: log, Version: "test", Observer: skips[name],
			DisableMonServer: true,
			Intervals: hatchery.Intervals{
				Heartbeat: time.Second, QueuePolling: time.Hour, Register: time.Hour,
				WorkerPool: 50 * time.Millisecond, WorkerPoolMin: 10 * time.Millisecond,
				BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Shutdown: 10 * time.Second,
			},
		})
		require.NoError(t, err)
		runs.Add(1)
		go func() { defer runs.Done(); _ = fw.Run(runCtx) }()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for n, l := range logs {
				t.Logf("%s logs:\n%s", n, l.String())
			}
		}
	})
	require.Eventually(t, func() bool { _, v2 := sim.WebsocketClients(); return v2 == len(names) }, 30*time.Second, 10*time.Millisecond,
		"both hatcheries listen to the queue")

	spec, err := json.Marshal(sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword})
	require.NoError(t, err)
	won := map[string]int{}
	for i := range jobs {
		winner, loser := names[i%2], names[(i+1)%2]
		id := sim.AddJobV2(cdssim.JobV2{
			Model:  sdk.V2WorkerModel{Name: "sq-" + winner, OSArch: "linux/amd64", Type: sdk.VSphere, Spec: spec},
			RunsOn: sdk.V2JobRunsOn{Model: "sq-" + winner, Flavor: "small"},
		})
		j := race.job(id)
		for _, step := range []struct {
			what string
			ch   chan struct{}
		}{{"the winner spawned", j.spawned}, {"the loser released its reservation", j.released}} {
			select {
			case <-step.ch:
			case <-ctx.Done():
				t.Fatalf("job %d (%s): %s: not before the test's deadline", i, id, step.what)
			}
		}
		// Measured at once: the lost booking left nothing reserved.
		n, cpus, mem := hs[loser].ReservedFootprint()
		assert.Equal(t, [3]int64{0, 0, 0}, [3]int64{int64(n), cpus, mem}, "job %d: %s's reserved footprint right after its booking was lost", i, loser)
		st, ok := sim.JobV2(id)
		require.True(t, ok)
		require.Equal(t, winner, st.TakenBy, "job %d", i)
		won[winner]++
	}
	assert.Equal(t, map[string]int{names[0]: perWinner, names[1]: perWinner}, won)

	race.mu.Lock()
	assert.Empty(t, race.entryReserved, "every decision began with nothing reserved")
	assert.Empty(t, race.refusals, "no capacity refusal: each hatchery had room for the next worker")
	race.mu.Unlock()
	for _, n := range names {
		for _, code := range skips[n].got() {
			assert.False(t, refusal.Reason(code).Waits(), "%s refused a job for %q", n, code)
		}
		env.WaitInventory(invs[n])
		started, err := hs[n].WorkersStarted(ctx)
		require.NoError(t, err)
		assert.Len(t, started, perWinner, "%s runs the workers of the jobs it won", n)
	}
}
