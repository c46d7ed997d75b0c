package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// reloadedConfig is a copy of cfg that shares none of the lists a test
// edits (the running configuration is never modified).
func reloadedConfig(cfg *config.Config) *config.Config {
	c := *cfg
	c.Flavors = append([]config.Flavor(nil), cfg.Flavors...)
	c.WorkerProvisioning = append([]config.WorkerProvisioning(nil), cfg.WorkerProvisioning...)
	return &c
}

// addV2Job queues a V2 debian12 job of flavor and returns its id.
func (r *rig) addV2Job(flavor, name string) string {
	spec, _ := json.Marshal(sdk.V2WorkerModelVSphereSpec{Image: "debian12", Username: "cds", Password: "demo-guest-password"})
	id := r.sims.API.AddJobV2(cdssim.JobV2{
		Model:   sdk.V2WorkerModel{Name: "debian12", OSArch: "linux/amd64", Type: sdk.VSphere, Spec: spec},
		RunsOn:  sdk.V2JobRunsOn{Model: "debian12", Flavor: flavor},
		JobName: name,
	})
	r.mu.Lock()
	r.jobs = append(r.jobs, rigJob{ID: id})
	r.mu.Unlock()
	return id
}

// TestReloadWhileJobsSpawn: a running daemon, held by maxWorker = 2 while
// its workers build, is reloaded with maxWorker = 5 and a new flavor while
// a spawn is in flight: every waiting job starts (5 workers at once, over
// the old cap), a job of the new flavor gets a VM of that flavor's size,
// no spawn fails. A reload with a changed endpoint (and a raised
// maxWorker) is refused and changes nothing; a broken file changes
// nothing; a SIGHUP reloads. Without the reload applying maxWorker only 2
// jobs would start; without the flavors being read from the reloaded
// configuration the new-flavor job's spawn would fail (unknown flavor).
func TestReloadWhileJobsSpawn(t *testing.T) {
	r := newRig(t)
	cfg := reloadedConfig(r.sims.Config)
	oneSimulatorTask(cfg)
	cfg.WorkerProvisioning = nil // workers only: the count is the jobs'
	cfg.CommonConfiguration.Provision.MaxWorker = 2
	cfg.CommonConfiguration.Provision.MaxConcurrentProvisioning = 1
	require.NoError(t, cfg.Validate())

	var mu sync.Mutex
	load := func() (*config.Config, error) { return nil, errors.New("no reload expected yet") }
	r.loadConfig = func() (*config.Config, error) {
		mu.Lock()
		defer mu.Unlock()
		return load()
	}
	setLoad := func(f func() (*config.Config, error)) {
		mu.Lock()
		load = f
		mu.Unlock()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.playWorkers(ctx, time.Hour) // the workers build until the test ends: each holds its place
	obs := newSpawnCounter(1, 1)  // reached: one spawn in flight after one succeeded
	hup := make(chan os.Signal, 1)
	dr := r.startWithReload(cfg, obs, hup)
	running := dr.running

	var jobs []string
	for i := range 4 {
		jobs = append(jobs, r.addV2Job("small", fmt.Sprintf("build-%d", i+1)))
	}
	select {
	case <-obs.reached:
	case <-time.After(60 * time.Second):
		t.Fatal("no second spawn in flight after 60s")
	}

	// The reload, the second spawn in flight: maxWorker 5, a new flavor.
	next := reloadedConfig(cfg)
	next.CommonConfiguration.Provision.MaxWorker = 5
	next.Flavors = append(next.Flavors, config.Flavor{Name: "xsmall", CPUs: 1, MemoryMB: 1024})
	require.NoError(t, next.Validate())
	setLoad(func() (*config.Config, error) { return reloadedConfig(next), nil })
	summary, err := running.Reload(ctx)
	require.NoError(t, err)
	assert.Contains(t, summary, "hatchery.vsphere.commonConfiguration.provision.maxWorker")
	assert.Contains(t, summary, "hatchery.vsphere.flavors")
	applied := running.Hatchery.Config()
	assert.Equal(t, 5, applied.CommonConfiguration.Provision.MaxWorker)
	require.NotNil(t, applied.FlavorNamed("xsmall"))

	jobs = append(jobs, r.addV2Job("xsmall", "build-xsmall"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, j := range jobs {
			assert.Len(c, r.launches[j], 1, "job %s launched once", j)
		}
	}, 90*time.Second, 100*time.Millisecond, "every job starts once, five at once, over the old maxWorker")
	_, _, failed := obs.counts()
	assert.Zero(t, failed, "no spawn failed, the one in flight at the reload included")
	var xsmall int32
	for _, v := range r.workers() {
		if v.Annotation.JobID == jobs[4] {
			xsmall = v.CPUs
		}
	}
	assert.Equal(t, int32(1), xsmall, "the new flavor's job got a VM of the new flavor")

	// A changed endpoint: refused as a whole, the raised maxWorker too.
	bad := reloadedConfig(next)
	bad.Endpoint = "https://other-vcenter.example.com/sdk"
	bad.CommonConfiguration.Provision.MaxWorker = 9
	setLoad(func() (*config.Config, error) { return reloadedConfig(bad), nil })
	summary, err = running.Reload(ctx)
	require.ErrorIs(t, err, daemon.ErrReloadRefused)
	assert.Contains(t, err.Error(), "hatchery.vsphere.endpoint")
	assert.Contains(t, summary, "hatchery.vsphere.endpoint")
	assert.NotContains(t, summary, "maxWorker", "only the keys that cannot change are named")
	assert.Same(t, applied, running.Hatchery.Config(), "the running configuration stays")

	// A broken file: the checks of `config check` refuse it, nothing changes.
	path := filepath.Join(t.TempDir(), "hatchery.toml")
	require.NoError(t, os.WriteFile(path, []byte("[hatchery.vsphere\nmaxWorker = \n"), 0o600))
	setLoad(func() (*config.Config, error) { return config.LoadAndValidate(path, config.LoadOptions{}) })
	_, err = running.Reload(ctx)
	require.Error(t, err)
	assert.Same(t, applied, running.Hatchery.Config(), "the running configuration stays")

	// SIGHUP reloads (here: the same configuration again, nothing changes).
	setLoad(func() (*config.Config, error) { return reloadedConfig(next), nil })
	hup <- syscall.SIGHUP
	require.Eventually(t, func() bool {
		return strings.Contains(r.logs.String(), `msg="configuration reloaded" changed=nothing`)
	}, 10*time.Second, 20*time.Millisecond, "the SIGHUP's reload")

	logs := r.logs.String()
	assert.Equal(t, 1, strings.Count(logs, `msg="configuration reloaded" changed="[`), "one line for the applied reload")
	assert.Equal(t, 1, strings.Count(logs, `msg="configuration reload refused, running configuration kept"`))
	assert.Equal(t, 1, strings.Count(logs, `msg="configuration reload failed, running configuration kept"`))
	_, err = dr.stop(t, 30*time.Second)
	require.NoError(t, err)
}

// startWithReload is startWith whose daemon reloads on each signal of
// hup (daemon.Options.Reload).
func (r *rig) startWithReload(cfg *config.Config, obs *spawnCounter, hup chan os.Signal) *daemonRun {
	r.t.Helper()
	r.reloadSignals = hup
	return r.startWith(cfg, r.log, obs)
}

// workers are the hatchery's worker VMs in the simulator.
func (r *rig) workers() []demo.SimVM {
	_, w := r.ourVMs()
	return w
}
