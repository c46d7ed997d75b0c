package demo_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestDemoServesBothPlacements: the demo runs two placements (demo.toml:
// cluster-a and cluster-b) and, while it runs, its /mon/metrics shows VMs
// of this hatchery in both at once (placement_vm_count above 0 for each),
// each with its vCPU headroom (demo.toml sets maxCpus per placement) and
// no failed clone; the VMs the hatchery lists in a placement run on a host
// of that cluster (the simulator's placement of a clone into the
// cluster's pool). The clones per placement are logged.
func TestDemoServesBothPlacements(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan demo.Info, 1)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One vCenter task at a time: two concurrent clones race inside
		// the pinned simulator, and this test runs under the race
		// detector (as TestCtlAgainstTheDemo). The simulator's own queue
		// (SerialTasks) also waits for the file removals a destroy starts
		// and does not wait for: one of them, under a warm-pool slot's
		// directory a new clone of the slot was filling, panicked the
		// simulator (RefreshStorageInfo) in a CI run.
		_, err := demo.Run(ctx, demo.Options{Tune: func(c *config.Config) { c.MaxConcurrentTasks = 1 },
			SerialTasks: true, RequestTimeout: testutil.Patience(t), OnReady: func(i demo.Info) { ready <- i }})
		done <- err
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	var info demo.Info
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("demo stopped at start: %v", err)
	case <-time.After(testutil.Patience(t)):
		t.Fatal("demo not ready before the test's deadline")
	}
	names := []string{"cluster-a", "cluster-b"}
	require.Len(t, info.Config.Placements, 2)
	for i, p := range info.Config.Placements {
		assert.Equal(t, names[i], p.Name)
		assert.Positive(t, p.MaxCPUs, "%s sets maxCpus", p.Name)
	}

	const prefix = "cds_hatchery_vsphere_"
	var fams map[string]*dto.MetricFamily
	// The metrics are collected every 2 s and VMs come and go: poll the
	// scrape (no signal says "a VM in each placement") until one shows
	// VMs in both and a clone counted in both. A VM is counted from its
	// creation, its clone once the clone task ended (the power-on is
	// part of the task): on a loaded machine a scrape shows the VMs of a
	// placement whose first clone task has not ended yet (3 VMs, 0 clones
	// in cluster-a at load 29), which is no fault.
	require.Eventually(t, func() bool {
		fams = scrape(t, info.MonURL)
		for _, name := range names {
			l := testutil.Labels{"placement": name}
			if v, ok := testutil.Series(fams, prefix+"placement_vm_count", l); !ok || v <= 0 {
				return false
			}
			if v, ok := testutil.Series(fams, prefix+"placement_clones", l); !ok || v <= 0 {
				return false
			}
		}
		return true
	}, testutil.Patience(t), 500*time.Millisecond, "placement_vm_count and placement_clones above 0 for both placements")

	for _, name := range names {
		l := testutil.Labels{"placement": name}
		vms, _ := testutil.Series(fams, prefix+"placement_vm_count", l)
		clones, ok := testutil.Series(fams, prefix+"placement_clones", l)
		require.True(t, ok, "placement_clones of %s", name)
		failures, ok := testutil.Series(fams, prefix+"placement_clone_failures", l)
		require.True(t, ok, "placement_clone_failures of %s", name)
		_, ok = testutil.Series(fams, prefix+"placement_headroom_vcpus", l)
		assert.True(t, ok, "placement_headroom_vcpus of %s (maxCpus set)", name)
		active, _ := testutil.Series(fams, prefix+"placement_state", testutil.Labels{"placement": name, "state": "active"})
		assert.Equal(t, 1.0, active, "%s active", name)
		assert.Positive(t, clones, "clones sent to %s", name)
		assert.Zero(t, failures, "failed clones to %s", name)
		t.Logf("placement %s: %v VMs now, %v clones, %v failed", name, vms, clones, failures)
	}

	// Where the VMs are: each of this hatchery's VMs whose record names a
	// placement runs on a host of that placement's cluster.
	seen := map[string]int{}
	for _, vm := range demo.ListVMs(info.Env) {
		a := vm.Annotation
		if vm.Template || a == nil || a.HatcheryName != info.Config.CommonConfiguration.Name || a.Placement == "" {
			continue
		}
		at, ok := info.Env.PlacedOn(vm.Name)
		if !ok {
			continue // destroyed meanwhile
		}
		assert.Equal(t, a.Placement, at.Cluster, "%s runs in its placement's cluster", vm.Name)
		seen[a.Placement]++
	}
	t.Logf("VMs by placement in the simulator: %v", seen)
	assert.Subset(t, []string{vcsimtest.ClusterA, vcsimtest.ClusterB}, keys(seen), "placements of the VMs listed")
}

// keys lists m's keys.
func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// scrape reads and parses base's /mon/metrics.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/mon/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}
