package inventory_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVcsimConcurrentFirstListings: many callers reading a listing
// inventory at once on a fresh client (the framework's spawners at start, or after a re-login)
// all succeed. Each may build a container view; the loser of that race
// must not destroy the view another caller is reading through
// (ManagedObjectNotFound on its listing otherwise).
func TestVcsimConcurrentFirstListings(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	for round := range 1 {
		c := env.NewClient(nil)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 40)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = inventory.Listing{Client: c}.VMs(env.Context())
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			assert.NoError(t, err, "round %d caller %d", round, i)
		}
	}
}
