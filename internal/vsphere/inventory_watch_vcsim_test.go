package vsphere_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// Issue 9: the watch inventory (inventoryMode = "watch") must not deadlock
// vcsim v0.56.0 — a ContainerView watch does when VMs are created while it
// waits — and must converge on the simulator's state. Each round runs the
// watch while 50 VMs are cloned, renamed, powered on and off and destroyed
// concurrently, all bounded by a deadline: on expiry the test fails with
// every goroutine's stack instead of hanging.

// watchRoundTimeout bounds one round (on this 2-core machine a round takes
// a few seconds; a deadlock would take forever).
const watchRoundTimeout = 90 * time.Second

func TestVcsimWatchInventoryConvergesUnderConcurrentChanges(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			runWatchRound(t, 50)
		})
	}
}

// watchedState is what the test compares: name -> power state and
// template flag.
type watchedState map[string]string

func stateOf(vms []vsphere.VM) watchedState {
	out := watchedState{}
	for _, v := range vms {
		out[v.Name] = fmt.Sprintf("%s template=%t cpus=%d", v.PowerState, v.Template, v.NumCPU)
	}
	return out
}

func runWatchRound(t *testing.T, n int) {
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 20})
	ctx, cancel := context.WithTimeout(env.Context(), watchRoundTimeout)
	defer cancel()
	failOnDeadline := func(what string, err error) {
		t.Helper()
		if ctx.Err() != nil {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
			_ = os.WriteFile(fmt.Sprintf("%s/watch-deadline-stacks.txt", t.TempDir()), []byte(b.String()), 0o600)
			t.Fatalf("%s: deadline reached (deadlock?): %v\n%s", what, err, b.String())
		}
		require.NoError(t, err, what)
	}

	// The watch runs on its own session; the writes on another one.
	watchClient := env.NewClient(nil)
	// A 10 s interval bounds each wait to 10 s and refuses a snapshot older
	// than 40 s: vcsim recomputes the whole filter for every change it
	// reports, which is slow under -race while 50 VMs change at once.
	inv := vsphere.NewWatchInventory(watchClient, 10*time.Second, slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inv.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })
	select {
	case <-inv.Synced():
	case <-ctx.Done():
		failOnDeadline("first watch sync", ctx.Err())
	}

	c := env.Client
	template, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	failOnDeadline("load template", err)
	folder, err := c.LoadFolder(ctx)
	failOnDeadline("load folder", err)
	pool, err := c.LoadResourcePool(ctx)
	failOnDeadline("load pool", err)
	poolRef := pool.Reference()

	// Each VM: clone (powered off) → rename → power on → one in three
	// powered off again → one in three of those destroyed.
	// The 50 VMs' steps interleave (one goroutine per VM) and run while the
	// watch waits, but one vCenter task at a time: concurrent tasks race and
	// panic inside vcsim v0.56.0 itself, whatever the watch does (under
	// -race: CloneVM_Task and Destroy_Task on the datastore's browser and
	// the registry; RenameTask's FindByName reading a VM a clone is still
	// naming: "object does not have a Name" panic).
	var taskMu sync.Mutex
	serial := func(fn func() error) error {
		taskMu.Lock()
		defer taskMu.Unlock()
		return fn()
	}
	var ops sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		ops.Add(1)
		go func() {
			defer ops.Done()
			name := fmt.Sprintf("watched-%02d", i)
			spec := &types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}}
			var ref *types.ManagedObjectReference
			err := serial(func() (err error) {
				ref, err = c.CloneVirtualMachine(ctx, template, folder, name, spec)
				return err
			})
			if err != nil {
				errs <- err
				return
			}
			vm := c.NewVirtualMachine(*ref)
			steps := []func() error{
				func() error { return c.RenameVirtualMachine(ctx, vm, name+"-renamed") },
				func() error { return c.StartVirtualMachine(ctx, vm) },
			}
			if i%3 == 0 {
				steps = append(steps, func() error { return c.ShutdownVirtualMachine(ctx, vm) })
				if i%2 == 0 {
					steps = append(steps, func() error { return c.DestroyVirtualMachine(ctx, vm) })
				}
			}
			for _, step := range steps {
				if err := serial(step); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { ops.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		failOnDeadline("concurrent vm operations", ctx.Err())
	}
	close(errs)
	for err := range errs {
		failOnDeadline("vm operation", err)
	}

	// Converge: the watch's snapshot equals a fresh listing.
	objs, err := c.ListVirtualMachines(ctx)
	failOnDeadline("list", err)
	want := watchedState{}
	for _, o := range objs {
		v := vsphere.VMFromObject(o)
		want[v.Name] = stateOf([]vsphere.VM{v})[v.Name]
	}
	destroyed, watched := 0, 0
	for i := range n {
		if i%6 == 0 {
			destroyed++
		}
	}
	for name := range want {
		if strings.HasPrefix(name, "watched-") {
			watched++
		}
	}
	require.Equal(t, n-destroyed, watched, "the simulator's own listing")
	for {
		ch := inv.Changed()
		vms, err := inv.VMs(ctx)
		failOnDeadline("read watch snapshot", err)
		got := stateOf(vms)
		if mapsEqual(got, want) {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("watch did not converge before the deadline:\n%s", diffStates(got, want))
		}
	}
	for i := range n {
		name := fmt.Sprintf("watched-%02d", i)
		_, old := want[name]
		require.False(t, old, "%s was renamed", name)
	}
	st := inv.Stats()
	require.NoError(t, st.LastErr, "the watch converged without an error (and so without a resync)")
	t.Logf("converged: %d vms, %d deliveries, %d snapshots", st.VMs, st.Refreshes, st.Generation)
}

func mapsEqual(a, b watchedState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func diffStates(got, want watchedState) string {
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, fmt.Sprintf("%s: got %q want %q", k, got[k], v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s: extra", k))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// After its session is lost (terminated by an operator or an idle
// timeout), the watch's collector is gone: the adapter logs in again, the
// wait on the old collector fails, the inventory resyncs on a new one and
// sees what changed meanwhile.
func TestVcsimWatchInventoryResyncsAfterSessionLoss(t *testing.T) {
	env := vcsimtest.Start(t, vcsimtest.Options{ForeignVMs: 5})
	ctx, cancel := context.WithTimeout(env.Context(), watchRoundTimeout)
	defer cancel()
	watchClient := env.NewClient(nil)
	inv := vsphere.NewWatchInventory(watchClient, 2*time.Second, slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inv.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })
	select {
	case <-inv.Synced():
	case <-ctx.Done():
		t.Fatal("no first watch sync before the deadline")
	}

	// The session ends; the watch's next wait logs in again and finds its
	// collector gone.
	env.TerminateSession(watchClient)
	waitFor := func(what string, ok func([]vsphere.VM) bool) {
		t.Helper()
		for {
			ch := inv.Changed()
			if vms, err := inv.VMs(ctx); err == nil && ok(vms) {
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("%s: not before the deadline (last error: %v)", what, inv.Stats().LastErr)
			}
		}
	}
	waitFor("re-login", func([]vsphere.VM) bool { return watchClient.Relogins() >= 1 })

	// A VM cloned now is seen only by a new collector.
	c := env.Client
	template, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folder, err := c.LoadFolder(ctx)
	require.NoError(t, err)
	pool, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	poolRef := pool.Reference()
	_, err = c.CloneVirtualMachine(ctx, template, folder, "after-session-loss", &types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}})
	require.NoError(t, err)
	waitFor("the vm cloned after the session loss", func(vms []vsphere.VM) bool {
		return slices.ContainsFunc(vms, func(v vsphere.VM) bool { return v.Name == "after-session-loss" })
	})
	require.GreaterOrEqual(t, watchClient.Relogins(), int64(1), "the watch's client logged in again")
}
