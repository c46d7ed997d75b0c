package vsphere_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// ilInstance is one hatchery process: its own session, its own
// inventory, its own clock for the IP pool.
type ilInstance struct {
	h     *vsphere.HatcheryVSphere
	inv   inventory.Inventory
	clock *testutil.Clock
}

const ilHatchery = "hatch-vi-iplock"

func ilStart(t *testing.T, env *vcsimtest.Env, client *vcenter.Client) ilInstance {
	t.Helper()
	cfg := env.Config()
	cfg.CommonConfiguration.Name = ilHatchery
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.67.0.1/30", "10.67.0.254", "255.255.255.0", "10.67.0.253" // .1 and .2
	inv := env.InventoryOver(cfg, client)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Inventory: inv, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	clock := testutil.NewClock(time.Now())
	h.SetIPClock(clock.Now)
	return ilInstance{h: h, inv: inv, clock: clock}
}

// ilSpawnAtOnce starts n spawns on each instance at the same moment and
// returns, by worker name, the error of each.
func ilSpawnAtOnce(t *testing.T, env *vcsimtest.Env, wave string, n int, insts ...ilInstance) map[string]error {
	t.Helper()
	var (
		mu   sync.Mutex
		errs = map[string]error{}
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for i, in := range insts {
		for j := range n {
			name := fmt.Sprintf("worker-il-%s-%d-%d", wave, i, j)
			args := viV2Args(ilHatchery, name, "run-"+name, "")
			wg.Go(func() {
				<-start
				err := in.h.SpawnWorker(env.Context(), args)
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			})
		}
	}
	close(start)
	wg.Wait()
	return errs
}

// ilAddresses checks that every spawn either succeeded or found no free
// address, and returns the address of each VM made, by address.
func ilAddresses(t *testing.T, env *vcsimtest.Env, errs map[string]error) map[string]string {
	t.Helper()
	holder := map[string]string{}
	for name, err := range errs {
		if err != nil {
			assert.True(t, errors.Is(err, ippool.ErrNoIPAvailable), "%s failed for another reason than no free address: %v", name, err)
			continue
		}
		st := env.MustInspect(name)
		a, perr := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
		require.NoError(t, perr, name)
		require.NotEmpty(t, a.IPAddress, name)
		assert.Equal(t, a.IPAddress, st.IPAddress, "%s: the guest has the address its annotation records", name)
		if other, dup := holder[a.IPAddress]; dup {
			t.Errorf("%s and %s both hold %s", name, other, a.IPAddress)
		}
		holder[a.IPAddress] = name
	}
	return holder
}

// ilLocks lists the folders of the hatchery's address locks.
func ilLocks(t *testing.T, env *vcsimtest.Env) []string {
	t.Helper()
	locks, err := env.Client.ListLocks(env.Context(), ilHatchery+ippool.LockPrefix)
	require.NoError(t, err)
	var out []string
	for n := range locks {
		out = append(out, strings.TrimPrefix(n, ilHatchery+ippool.LockPrefix))
	}
	return out
}

// ilStatus is the value of the instance's vsphere/ip-locks status line.
func ilStatus(t *testing.T, in ilInstance) string {
	t.Helper()
	for _, l := range in.h.Status(context.Background()) {
		if l.Component == "vsphere/ip-locks" {
			return l.Value
		}
	}
	t.Fatal("no vsphere/ip-locks line in /mon/status")
	return ""
}

// ilDestroy destroys VMs behind the hatcheries' backs.
func ilDestroy(t *testing.T, env *vcsimtest.Env, names []string) {
	t.Helper()
	for _, name := range names {
		ref := env.MustInspect(name).Ref
		require.NoError(t, env.Client.ShutdownVirtualMachine(env.Context(), vim.RefOf(ref)))
		require.NoError(t, env.Client.DestroyVirtualMachine(env.Context(), vim.RefOf(ref)))
	}
}

func ilNames(holder map[string]string) []string {
	var out []string
	for _, n := range holder {
		out = append(out, n)
	}
	return out
}

// TestVcsimTwoInstancesNeverShareAnIPAndReconcileACrashedOnesLocks: two
// instances of one hatchery name (two sessions, two inventories) on one
// vCenter, a range of two addresses.
//   - Two spawns on each at the same moment: each address is taken
//     through a lock folder vCenter keeps unique, so two VMs are made,
//     never with one address; the other spawns find no free address.
//   - Their VMs gone, each instance's cleanup deletes its own unused
//     locks at once; an address whose lock the other instance deleted is
//     offered again after the next pass's listing.
//   - The first instance takes both addresses, then "crashes": its VMs
//     are destroyed behind its back, its locks stay. The second
//     instance's cleanup keeps those locks (the first might be cloning)
//     until they have been unused for ippool.ForeignLockGrace, and
//     meanwhile finds no free address; then it deletes them and takes
//     both addresses again.
func TestVcsimTwoInstancesNeverShareAnIPAndReconcileACrashedOnesLocks(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	a := ilStart(t, env, env.NewClient(nil))
	b := ilStart(t, env, env.NewClient(nil))
	ctx := env.Context()
	both := []string{"10.67.0.1", "10.67.0.2"}

	errs := ilSpawnAtOnce(t, env, "1", 2, a, b)
	holder := ilAddresses(t, env, errs)
	require.Len(t, holder, 2, "two vms made, one per address: %v", errs)
	assert.ElementsMatch(t, both, ilLocks(t, env))

	ilDestroy(t, env, ilNames(holder))
	for _, in := range []ilInstance{a, b} {
		in.clock.Advance(ippool.ReservationTTL) // the reservations of the clones are over
		env.WaitInventory(in.inv)
		in.h.WarmKillAwolServersPass(ctx)
	}
	require.Empty(t, ilLocks(t, env), "each instance deletes its own unused locks at once")
	// a's first pass still listed b's lock (taken for a); its next pass
	// sees it gone and offers the address again.
	a.h.WarmKillAwolServersPass(ctx)

	errs = ilSpawnAtOnce(t, env, "2", 2, a)
	holder = ilAddresses(t, env, errs)
	require.Len(t, holder, 2, "a takes both addresses: %v", errs)
	// a crashes: its VMs are destroyed (by an operator, or by b's cleanup
	// once their workers are gone), its locks stay behind.
	ilDestroy(t, env, ilNames(holder))
	env.WaitInventory(b.inv)

	b.h.WarmKillAwolServersPass(ctx)
	require.ElementsMatch(t, both, ilLocks(t, env), "another instance's locks are kept: it may be cloning")
	assert.Equal(t, "0 held by this instance, 2 taken by another", ilStatus(t, b), "b's /mon/status line")
	assert.Equal(t, "2 held by this instance, 0 taken by another", ilStatus(t, a), "a's, as it was when it stopped")
	b.clock.Advance(ippool.ForeignLockGrace - time.Second)
	b.h.WarmKillAwolServersPass(ctx)
	require.ElementsMatch(t, both, ilLocks(t, env), "not before the grace")
	for name, err := range ilSpawnAtOnce(t, env, "3", 1, b) {
		require.ErrorIs(t, err, ippool.ErrNoIPAvailable, "%s: every address is still locked", name)
	}

	b.clock.Advance(time.Second)
	b.h.WarmKillAwolServersPass(ctx)
	assert.Empty(t, ilLocks(t, env), "unused for the grace: the crashed instance's locks are reconciled")

	errs = ilSpawnAtOnce(t, env, "4", 2, b)
	holder = ilAddresses(t, env, errs)
	assert.Len(t, holder, 2, "both addresses are used again: %v", errs)
	assert.ElementsMatch(t, both, ilLocks(t, env), "through locks of b's own")
}
