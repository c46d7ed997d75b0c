package vcsimtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"
)

// TestCloneBodiesOneAtATime: clones of two templates into one folder,
// called all at once, each end with their VM named as asked, and the
// simulator ran their bodies one at a time (cloneBodies, the workaround
// for the pinned simulator's duplicate-name check that panics on a
// child registered without its name yet). Every body went through the
// gate: as many ran as clones were called.
func TestCloneBodiesOneAtATime(t *testing.T) {
	t.Parallel()
	env := Start(t, Options{Templates: []Template{{Name: "bodies-a"}, {Name: "bodies-b"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	finder := newFinder(env.Admin.Client)
	dc, err := finder.Datacenter(ctx, DatacenterName)
	require.NoError(t, err)
	finder.SetDatacenter(dc)
	folder, err := finder.Folder(ctx, FolderPath)
	require.NoError(t, err)
	pool, err := finder.ResourcePool(ctx, ResourcePoolPath)
	require.NoError(t, err)
	poolRef := pool.Reference()
	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &poolRef}}

	const perTemplate = 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*perTemplate)
	var names []string
	for _, tplName := range []string{"bodies-a", "bodies-b"} {
		tpl, err := finder.VirtualMachine(ctx, tplName)
		require.NoError(t, err)
		for i := range perTemplate {
			name := fmt.Sprintf("%s-clone-%d", tplName, i)
			names = append(names, name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				task, err := tpl.Clone(ctx, folder, name, spec)
				if err == nil {
					_, err = task.WaitForResult(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("clone %q from %q: %w", name, tplName, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, name := range names {
		env.MustInspect(name)
	}
	ran, most := env.bodies.counts()
	assert.Equal(t, len(names), ran, "every clone's body went through the gate")
	assert.Equal(t, 1, most, "clone bodies ran one at a time")
}
