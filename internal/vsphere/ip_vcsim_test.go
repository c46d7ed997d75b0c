package vsphere_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// TestVcsimConcurrentSpawnsGetDistinctIPs: spawns deciding at once pick
// static IPs from the inventory of the mode under test (CI runs it in
// every mode: a refreshed snapshot lags behind the clones) plus local
// reservations. No two workers share an address, none takes the address a
// foreign VM holds, and a second wave started before the inventory shows
// the first avoids the first wave's addresses.
func TestVcsimConcurrentSpawnsGetDistinctIPs(t *testing.T) {
	t.Parallel()
	const hatch = "hatch-vi-ip"
	env := vcsimtest.Start(t, vcsimtest.Options{})
	const foreignIP = "10.66.0.10" // the first address of the range
	env.AddVMs([]vcsimtest.ForeignVM{{Name: "someone-else", PoweredOn: true, NumCPU: 1, MemoryMB: 1024, IP: foreignIP}})
	cfg := env.Config()
	cfg.CommonConfiguration.Name = hatch
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.66.0.10/24", "10.66.0.1", "255.255.255.0", "10.66.0.2"
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, Inventory: inv})
	require.NoError(t, err)
	env.WaitInventory(inv) // the foreign VM is known before any decision

	spawnWave := func(wave, n int) []string {
		var wg sync.WaitGroup
		names := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			names[i] = fmt.Sprintf("worker-ip-%d-%d", wave, i)
			job := fmt.Sprintf("run-ip-%d-%d", wave, i)
			wc := spawn.WorkerConfig{Name: names[i], HatcheryName: hatch, APIEndpoint: "http://api", APIToken: "jwt", RunJobID: job, Model: "m"}
			args := spawn.Arguments{
				WorkerName: names[i], JobID: job, HatcheryName: hatch, WorkerConfig: wc,
				Model: sdk.WorkerStarterWorkerModel{
					ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
					VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
					Cmd:         "./worker",
				},
			}
			wg.Go(func() { errs[i] = h.SpawnWorker(env.Context(), args) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, names[i])
		}
		return names
	}

	// The second wave starts at once: the inventory need not show the first.
	names := append(spawnWave(1, 6), spawnWave(2, 4)...)
	holder := map[string]string{foreignIP: "someone-else"}
	for _, n := range names {
		st := env.MustInspect(n)
		a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
		require.NoError(t, err, n)
		require.NotEmpty(t, a.IPAddress, n)
		assert.Equal(t, a.IPAddress, st.IPAddress, "%s: the guest has the address its annotation records", n)
		if other, taken := holder[a.IPAddress]; taken {
			t.Errorf("%s and %s both hold %s", n, other, a.IPAddress)
		}
		holder[a.IPAddress] = n
	}
	assert.Len(t, holder, len(names)+1)
}
