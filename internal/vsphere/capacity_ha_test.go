package vsphere

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// TestCapacityAcrossInstancesOvershootBound: two instances of one hatchery
// name (same VMs listed, each its own ledger) decide at the same moment.
// Each counts every VM of the hatchery name plus its own spawns in flight,
// so each admits what fits its own view: the total overshoots maxCpus by
// at most the other instance's footprint in flight, never more
// (docs/high-availability.md#capacity-across-instances). Once the other
// instance's VM is listed, it is counted and the next decision is refused.
func TestCapacityAcrossInstancesOvershootBound(t *testing.T) {
	t.Parallel()
	const limit, footprint = 16, 8 // maxCpus; the large flavor's vCPUs
	cfg := config.Config{MaxCPUs: limit, Flavors: capFlavors()}
	a, b := newCapEnv(t, cfg), newCapEnv(t, cfg)
	used := capUsedVMs(1, footprint, 16384) // a worker of the hatchery name, started by either
	a.inv.Set(used...)
	b.inv.Set(used...)

	// Each instance gets several decisions at once; both start together.
	const perInstance = 4
	var (
		mu      sync.Mutex
		allowed = map[string]int{}
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for name, env := range map[string]*capEnv{"a": a, "b": b} {
		for i := range perInstance {
			wg.Go(func() {
				<-start
				ok, err := env.h.CanAllocateResources(context.Background(), capV2("large"), fmt.Sprintf("%s-job-%d", name, i), nil)
				if err == nil && ok {
					mu.Lock()
					allowed[name]++
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()

	// Alone, each instance keeps to maxCpus: one large spawn in flight each.
	assert.Equal(t, 1, allowed["a"], "instance a keeps its own view within maxCpus")
	assert.Equal(t, 1, allowed["b"], "instance b keeps its own view within maxCpus")
	total := footprint * (len(used) + allowed["a"] + allowed["b"])
	assert.LessOrEqual(t, total, limit+footprint, "overshoot bounded by one in-flight footprint of the other instance")
	assert.Greater(t, total, limit, "without an arbiter the two instances do overshoot: the bound is reached, not avoided")

	// b's spawn created its VM: a lists it (same hatchery name) and counts
	// it with its own spawn in flight: no room left.
	a.inv.Set(append(used, capVM("worker-b", "b-job-0", footprint, 16384))...)
	ok, err := a.h.CanAllocateResources(context.Background(), capV2("large"), "a-job-late", nil)
	require.NoError(t, err)
	assert.False(t, ok, "the other instance's VM is counted once listed")
}
