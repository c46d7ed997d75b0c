package vcsimtest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVcsimCollectorDestroyedUnderItsWait: a property collector destroyed
// while its WaitForUpdatesEx runs and its VM keeps changing ends that wait
// as vCenter does: an answer (the updates, or nothing) or RequestCanceled,
// never a broken connection. The pinned simulator alone panics there in
// WaitForUpdatesEx ("mo.Reference is nil, not *simulator.PropertyFilter")
// when the destroy lands while the wait ranges over the filters it
// removes; the collector guard of vcsimtest (collectors.go) lets the wait
// return first. Twenty filters on the VM make each range long, so most
// rounds land a destroy inside one: without the guard the test fails in
// its first rounds.
func TestVcsimCollectorDestroyedUnderItsWait(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testutil.PatienceContext(t)
	c := env.Admin.Client
	vmRef := env.MustInspect(vcsimtest.DefaultTemplate).Ref

	// The VM changes every 2 ms until the test ends.
	defer keepChanging(ctx, env, vmRef, 2*time.Millisecond)()

	maxWait := int32(5)
	for round := range 25 {
		res, err := methods.CreatePropertyCollector(ctx, c, &types.CreatePropertyCollector{This: c.ServiceContent.PropertyCollector})
		require.NoError(t, err)
		pc := res.Returnval
		for range 20 {
			_, err := methods.CreateFilter(ctx, c, &types.CreateFilter{This: pc, Spec: types.PropertyFilterSpec{
				ObjectSet: []types.ObjectSpec{{Obj: vmRef}},
				PropSet:   []types.PropertySpec{{Type: "VirtualMachine", PathSet: []string{"config.annotation"}}},
			}})
			require.NoError(t, err)
		}
		base, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc})
		require.NoError(t, err)
		version := base.Returnval.Version
		// Each round polls, lets the wait see a few changes (it returns at
		// the first, then polls again), and destroys the collector under
		// whichever poll runs then.
		polled := make(chan error, 1)
		go func() {
			for {
				r, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc, Version: version, Options: &types.WaitOptions{MaxWaitSeconds: &maxWait}})
				if err != nil || r.Returnval == nil {
					polled <- err
					return
				}
				version = r.Returnval.Version
			}
		}()
		time.Sleep(time.Duration(5+round%7) * time.Millisecond) // where in its poll the destroy lands: varied, not a synchronisation
		_, err = methods.DestroyPropertyCollector(ctx, c, &types.DestroyPropertyCollector{This: pc})
		require.NoError(t, err, "round %d: destroy", round)
		err = <-polled
		if err != nil && !fault.Is(err, &types.RequestCanceled{}) && !fault.Is(err, &types.ManagedObjectNotFound{}) {
			t.Fatalf("round %d: the wait under the destroy ended with %v: the simulator broke the connection", round, err)
		}
	}
}

// TestVcsimCollectorPolledTwiceAtOnce: a collector polled again while an
// older poll of it still runs (a client that gave up on its first poll,
// as the hatchery does with a bounded request under load) answers the
// newer poll, and the older ends (RequestCanceled, or its answer); its VM
// changing all the while, so both polls have update sets to compute. The
// pinned simulator alone reads and writes the collector's pending update
// set from both polls unlocked: under -race this test reports the race
// without the serialisation of vcsimtest's collector guard
// (collectors.go, serialPoll).
func TestVcsimCollectorPolledTwiceAtOnce(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testutil.PatienceContext(t)
	c := env.Admin.Client
	vmRef := env.MustInspect(vcsimtest.DefaultTemplate).Ref

	defer keepChanging(ctx, env, vmRef, time.Millisecond)()

	res, err := methods.CreatePropertyCollector(ctx, c, &types.CreatePropertyCollector{This: c.ServiceContent.PropertyCollector})
	require.NoError(t, err)
	pc := res.Returnval
	_, err = methods.CreateFilter(ctx, c, &types.CreateFilter{This: pc, Spec: types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: vmRef}},
		PropSet:   []types.PropertySpec{{Type: "VirtualMachine", PathSet: []string{"config.annotation"}}},
	}})
	require.NoError(t, err)
	maxWait := int32(5)
	for round := range 30 {
		polls := make(chan error, 2)
		var start sync.WaitGroup
		start.Add(2)
		for range 2 {
			go func() {
				start.Done()
				start.Wait()
				_, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc, Options: &types.WaitOptions{MaxWaitSeconds: &maxWait}})
				polls <- err
			}()
		}
		for range 2 {
			if err := <-polls; err != nil && !fault.Is(err, &types.RequestCanceled{}) {
				t.Fatalf("round %d: a poll ended with %v", round, err)
			}
		}
	}
}

// keepChanging changes vm's annotation in the simulator every period
// until the returned stop is called, which waits for the changes to end.
func keepChanging(ctx context.Context, env *vcsimtest.Env, vmRef types.ManagedObjectReference, period time.Duration) (stop func()) {
	changing, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sctx := env.SimContext()
		vm := env.Model.Map().Get(vmRef).(*simulator.VirtualMachine)
		tk := time.NewTicker(period)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-changing.Done():
				return
			case <-tk.C:
			}
			sctx.WithLock(vm, func() {
				sctx.Update(vm, []types.PropertyChange{{Name: "config.annotation", Val: fmt.Sprintf("change %d", i)}})
			})
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// TestVcsimCollectorPollReadsOnlyItsOwnObjects: a poll of a collector
// whose filter lists one object reads that object for its own changes
// only, not for each change of every other object of the inventory, and
// still reports its own changes. The pinned simulator queues every change
// of the model on every collector and collects the collector's filters
// again for each one (fifty changes of another folder: fifty reads of the
// watched one); the tests' simulator passes a collector only the changes
// its filters may report (pollscope.go). The folders count the reads of
// the property collection (the simulator's lookup through Get).
func TestVcsimCollectorPollReadsOnlyItsOwnObjects(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testutil.PatienceContext(t)
	c := env.Admin.Client
	watched, other := newCountedFolder("counted-watched"), newCountedFolder("counted-other")
	env.Model.Map().Put(watched)
	env.Model.Map().Put(other)

	pc, err := property.DefaultCollector(c).Create(ctx)
	require.NoError(t, err)
	_, err = pc.CreateFilter(ctx, types.CreateFilter{Spec: types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: watched.Self}},
		PropSet:   []types.PropertySpec{{Type: "Folder", PathSet: []string{"name"}}},
	}})
	require.NoError(t, err)
	poll := changesPoller(t, ctx, c, pc.Reference())
	rename := func(f *countedFolder, name string) { renameFolder(env, f, name) }

	require.Len(t, poll(), 1, "the first poll reports the watched folder")
	// The queued change CreateFilter left (collectors.go) is read now.
	require.Empty(t, poll())
	before := watched.reads.Load()
	for i := range 50 {
		rename(other, fmt.Sprintf("other-%d", i))
	}
	assert.Empty(t, poll(), "no change of the watched folder")
	assert.Zero(t, watched.reads.Load()-before, "reads of the watched folder for another folder's changes")

	rename(watched, "watched-renamed")
	fs := poll()
	require.Len(t, fs, 1)
	require.Len(t, fs[0].ObjectSet, 1)
	ou := fs[0].ObjectSet[0]
	assert.Equal(t, watched.Self, ou.Obj)
	require.Len(t, ou.ChangeSet, 1)
	assert.Equal(t, "watched-renamed", ou.ChangeSet[0].Val)
}

// countedFolder is a folder whose reads by the simulator's property
// collection are counted.
type countedFolder struct {
	mo.Folder
	reads *atomic.Int64
}

// changesPoller returns a poll of the collector pc: it reads the changes
// once, without waiting, from the version the previous poll left, as the
// hatchery's watch does.
func changesPoller(t *testing.T, ctx context.Context, c *vim25.Client, pc types.ManagedObjectReference) func() []types.PropertyFilterUpdate {
	noWait := int32(0)
	version := ""
	return func() []types.PropertyFilterUpdate {
		t.Helper()
		res, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc, Version: version, Options: &types.WaitOptions{MaxWaitSeconds: &noWait}})
		require.NoError(t, err)
		if res.Returnval == nil {
			return nil
		}
		version = res.Returnval.Version
		return res.Returnval.FilterSet
	}
}

// renameFolder renames f in the simulator, telling the collectors.
func renameFolder(env *vcsimtest.Env, f *countedFolder, name string) {
	sim := env.SimContext()
	sim.WithLock(f, func() { sim.Update(f, []types.PropertyChange{{Name: "name", Val: name}}) })
}

func newCountedFolder(value string) *countedFolder {
	f := &countedFolder{reads: &atomic.Int64{}}
	f.Self = types.ManagedObjectReference{Type: "Folder", Value: value}
	f.Name = value
	return f
}

// Get is how the simulator's property collection reads the object.
func (f *countedFolder) Get() mo.Reference {
	f.reads.Add(1)
	return &f.Folder
}

// TestVcsimListViewCollectorPollReadsOnlyItsViewsObjects: a collector
// whose filter traverses a list view's contents (the hatchery's wait
// collector, internal/vcenter/vim/waits.go) hears only of the changes
// of the view and of the objects added to it: fifty changes of a folder
// outside the view read none of the view's objects, where the pinned
// simulator (every change reaching a collector whose filter traverses)
// collected the whole view again for each. What a poll reports is
// unchanged: the watched folder's change, then an object entering with
// the view's addition and its own change after that.
func TestVcsimListViewCollectorPollReadsOnlyItsViewsObjects(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testutil.PatienceContext(t)
	c := env.Admin.Client
	watched, other := newCountedFolder("counted-in-view"), newCountedFolder("counted-outside")
	env.Model.Map().Put(watched)
	env.Model.Map().Put(other)

	lv, err := methods.CreateListView(ctx, c, &types.CreateListView{This: *c.ServiceContent.ViewManager, Obj: []types.ManagedObjectReference{watched.Self}})
	require.NoError(t, err)
	view := lv.Returnval
	pc, err := property.DefaultCollector(c).Create(ctx)
	require.NoError(t, err)
	_, err = pc.CreateFilter(ctx, types.CreateFilter{Spec: types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{
			Obj:       view,
			Skip:      types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ListView", Path: "view"}},
		}},
		PropSet: []types.PropertySpec{{Type: "Folder", PathSet: []string{"name"}}},
	}})
	require.NoError(t, err)
	poll := changesPoller(t, ctx, c, pc.Reference())
	rename := func(f *countedFolder, name string) { renameFolder(env, f, name) }
	// changed returns the objects a poll reported and their new names.
	changed := func(fs []types.PropertyFilterUpdate) map[string]string {
		out := map[string]string{}
		for _, f := range fs {
			for _, ou := range f.ObjectSet {
				for _, ch := range ou.ChangeSet {
					out[ou.Obj.Value] = fmt.Sprint(ch.Val)
				}
			}
		}
		return out
	}

	require.Equal(t, map[string]string{watched.Self.Value: "counted-in-view"}, changed(poll()), "the first poll reports the view's folder")
	require.Empty(t, poll()) // the queued change CreateFilter left (collectors.go)
	before := watched.reads.Load()
	for i := range 50 {
		rename(other, fmt.Sprintf("outside-%d", i))
	}
	assert.Empty(t, poll(), "no change of the view's folder")
	assert.Zero(t, watched.reads.Load()-before, "reads of the view's folder for another folder's changes")

	rename(watched, "in-view-renamed")
	assert.Equal(t, map[string]string{watched.Self.Value: "in-view-renamed"}, changed(poll()))

	_, err = methods.ModifyListView(ctx, c, &types.ModifyListView{This: view, Add: []types.ManagedObjectReference{other.Self}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{other.Self.Value: "outside-49"}, changed(poll()), "the added folder enters with its name")
	rename(other, "added-renamed")
	assert.Equal(t, map[string]string{other.Self.Value: "added-renamed"}, changed(poll()), "the added folder's change is reported")
}
