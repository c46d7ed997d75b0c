package vsphere

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
)

func v2Model(image string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "my-model", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: image},
	}
}

func v1Model(group, name string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: name, Type: sdk.VSphere, Group: &sdk.Group{Name: group}}}
}

// idleDebianPool is n idle V2 pool VMs of the model debian12.
func idleDebianPool(n int) []inventory.VM {
	var vms []inventory.VM
	for i := range n {
		vms = append(vms, warmProvVM(fmt.Sprintf("warmpool-v2-%02d", i), "debian12", ""))
	}
	return vms
}

// startClaimers starts n goroutines (joined through wg) that each claim one
// debian12 VM once start is closed, appending what they got to got under mu.
func startClaimers(e *warmEnv, n int, start <-chan struct{}, wg *sync.WaitGroup, mu *sync.Mutex, got *[]string) {
	for range n {
		wg.Go(func() {
			<-start
			vm, err := e.h.pool.Claim(context.Background(), v2Model("debian12"), nil, true)
			if err != nil || vm == nil {
				return
			}
			mu.Lock()
			*got = append(*got, vm.Name)
			mu.Unlock()
		})
	}
}

// TestClaimsRaceSurplusRemoval: claims and the surplus removal race on the
// same idle VMs; each VM is either claimed once or destroyed, never both
// (run with -race). The inventory here never catches up: a claim listing
// it after a destroy must not take the destroyed VM.
func TestClaimsRaceSurplusRemoval(t *testing.T) {
	t.Parallel()
	const pool, claimers = 6, 8
	vms := idleDebianPool(pool)
	e := newWarmEnv(t, warmConfig(), vms, nil)
	var (
		mu        sync.Mutex
		claimed   []string
		destroyed []string
		wg        sync.WaitGroup
	)
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, ref vctypes.Ref) error {
		mu.Lock()
		defer mu.Unlock()
		destroyed = append(destroyed, strings.TrimPrefix(ref.Value, "vm-"))
		return nil
	}).AnyTimes()
	start := make(chan struct{})
	startClaimers(e, claimers, start, &wg, &mu, &claimed)
	wg.Go(func() {
		<-start
		// The pool is configured to zero: every idle VM is surplus.
		e.h.pool.RemoveSurplus(context.Background(), vms, e.h.pool.Counts(vms), nil)
	})
	close(start)
	wg.Wait()

	taken := map[string]int{}
	for _, n := range append(claimed, destroyed...) {
		taken[n]++
	}
	assert.Len(t, taken, pool, "every idle vm is claimed or destroyed")
	for n, c := range taken {
		assert.Equal(t, 1, c, "%s claimed or destroyed more than once", n)
	}
	for _, n := range destroyed {
		// A snapshot taken before the destroy still shows it: never
		// offered again until a listing no longer does.
		assert.Equal(t, lifecycle.Destroyed, e.h.life.Phase(n), "%s destroyed", n)
	}
	for _, n := range claimed {
		assert.Equal(t, lifecycle.Claimed, e.h.life.Phase(n))
	}
}
