package vcsimtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVcsimContainerViewReportsVMsEnteringAndLeaving: a property filter on
// a folder's ContainerView `view` hears of a VM made in the folder, moved
// out of it, moved back and destroyed, as on vCenter. The pinned simulator
// reports only the first of these; the tests' simulator is extended to the
// documented behaviour (containerview.go).
func TestVcsimContainerViewReportsVMsEnteringAndLeaving(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testutil.PatienceContext(t)
	c := env.Admin.Client
	finder := find.NewFinder(c, true)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	folder, err := finder.Folder(ctx, vcsimtest.FolderPath)
	require.NoError(t, err)
	pool, err := finder.ResourcePool(ctx, vcsimtest.ResourcePoolPath)
	require.NoError(t, err)
	other, err := folder.CreateFolder(ctx, "cv-other")
	require.NoError(t, err)

	cv, pc := watchedVMView(t, ctx, c, folder.Reference())

	version := ""
	maxWait := int32(30)
	// next waits for the filter's next update and returns the view it
	// reports.
	next := func() []types.ManagedObjectReference {
		t.Helper()
		for {
			res, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc.Reference(), Version: version, Options: &types.WaitOptions{MaxWaitSeconds: &maxWait}})
			require.NoError(t, err)
			if res.Returnval == nil {
				continue
			}
			version = res.Returnval.Version
			if view, ok := viewReported(res.Returnval.FilterSet, cv.Reference()); ok {
				return view
			}
		}
	}
	before := next()

	task, err := folder.CreateVM(ctx, types.VirtualMachineConfigSpec{
		Name: "cv-enter", GuestId: "otherGuest64",
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}, pool, nil)
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx, nil)
	require.NoError(t, err)
	ref := info.Result.(types.ManagedObjectReference)
	require.Contains(t, next(), ref, "a VM made in the folder enters its view")

	task, err = other.MoveInto(ctx, []types.ManagedObjectReference{ref})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	got := next()
	require.NotContains(t, got, ref, "a VM moved out of the folder leaves its view")
	require.ElementsMatch(t, before, got)

	task, err = folder.MoveInto(ctx, []types.ManagedObjectReference{ref})
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	require.Contains(t, next(), ref, "a VM moved back enters the view again")

	vm := object.NewVirtualMachine(c, ref)
	task, err = vm.Destroy(ctx)
	require.NoError(t, err)
	require.NoError(t, task.Wait(ctx))
	got = next()
	require.NotContains(t, got, ref, "a VM destroyed leaves the view")
	require.ElementsMatch(t, before, got)
}

// TestVcsimContainerViewReportsConcurrentRemovalsInOrder: VMs of one
// folder removed at once leave its view, and once they are all gone the
// last `view` a filter reported is the view's contents, as on vCenter,
// whose collector reports a property's changes in the order they were
// made (containerview.go's reports lock). The simulator's destroy removes
// the VM from the registry without its folder's lock (folderRemoveChild),
// so the views hear of removals at once; the test removes them from the
// registry so, straight from goroutines, because destroy tasks at once
// race inside the pinned simulator itself (serialtasks.go).
func TestVcsimContainerViewReportsConcurrentRemovalsInOrder(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx := testutil.PatienceContext(t)
	c := env.Admin.Client
	finder := find.NewFinder(c, true)
	dc, err := finder.Datacenter(ctx, vcsimtest.DatacenterName)
	require.NoError(t, err)
	folders, err := dc.Folders(ctx)
	require.NoError(t, err)

	cv, pc := watchedVMView(t, ctx, c, folders.VmFolder.Reference())

	version := ""
	var last []types.ManagedObjectReference
	noWait := int32(0)
	// drain reads the filter's updates until none is left, keeping the
	// last view reported.
	drain := func() {
		t.Helper()
		for {
			res, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc.Reference(), Version: version, Options: &types.WaitOptions{MaxWaitSeconds: &noWait}})
			require.NoError(t, err)
			if res.Returnval == nil {
				return
			}
			version = res.Returnval.Version
			if view, ok := viewReported(res.Returnval.FilterSet, cv.Reference()); ok {
				last = view
			}
		}
	}
	drain()

	const rounds, vms = 20, 16
	for r := range rounds {
		refs := env.AddForeignVMs(fmt.Sprintf("cv-removed-%d-", r), vms)
		var wg sync.WaitGroup
		for _, ref := range refs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				env.Model.Map().Remove(env.SimContext(), ref)
			}()
		}
		wg.Wait()
		drain()
		var now mo.ContainerView
		require.NoError(t, property.DefaultCollector(c).RetrieveOne(ctx, cv.Reference(), []string{"view"}, &now))
		require.ElementsMatch(t, now.View, last, "round %d: the last view reported is the view's contents", r)
		for _, ref := range refs {
			require.NotContains(t, last, ref, "round %d: a removed VM left the view", r)
		}
	}
}

// viewReported returns the last contents of the container view cv that
// the updates fs report, and whether they report any.
func viewReported(fs []types.PropertyFilterUpdate, cv types.ManagedObjectReference) (view []types.ManagedObjectReference, ok bool) {
	for _, fu := range fs {
		for _, ou := range fu.ObjectSet {
			for _, ch := range ou.ChangeSet {
				if ou.Obj == cv && ch.Name == "view" {
					refs, _ := ch.Val.(types.ArrayOfManagedObjectReference)
					view, ok = refs.ManagedObjectReference, true
				}
			}
		}
	}
	return view, ok
}

// watchedVMView makes a container view of the VMs directly in container
// and a property collector with one filter on the view's contents.
func watchedVMView(t *testing.T, ctx context.Context, c *vim25.Client, container types.ManagedObjectReference) (*view.ContainerView, *property.Collector) {
	t.Helper()
	cv, err := view.NewManager(c).CreateContainerView(ctx, container, []string{"VirtualMachine"}, false)
	require.NoError(t, err)
	pc, err := property.DefaultCollector(c).Create(ctx)
	require.NoError(t, err)
	_, err = pc.CreateFilter(ctx, types.CreateFilter{Spec: types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: cv.Reference()}},
		PropSet:   []types.PropertySpec{{Type: "ContainerView", PathSet: []string{"view"}}},
	}})
	require.NoError(t, err)
	return cv, pc
}
