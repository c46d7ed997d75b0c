package vcsimtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestCloneBodiesNeverBesideAClone: clones of two templates and instant
// clones of two running parents, all called at once into one folder, each
// end with their VM named as asked, and the simulator never ran a clone's
// body beside another clone body (cloneBodies, clonebodies.go: the
// workaround for the pinned simulator's duplicate-name check, which
// panics on a child registered without its name yet). Every body went
// through the gate: as many ran as clones were called. Without the gate's
// lock the bodies overlap (checked: overlaps > 0).
func TestCloneBodiesNeverBesideAClone(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Templates: []vcsimtest.Template{{Name: vcsimtest.DefaultTemplate}, {Name: "bodies-b"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parents := []instantFixture{startParent(ctx, t, env, "parent-a", "", true), startParent(ctx, t, env, "parent-b", "", true)}
	ranBefore, _ := env.CloneBodies()
	tplA, folder, pool := cloneFixture(ctx, t, env)
	finder := dcFinder(ctx, t, env)
	tplB, err := finder.VirtualMachine(ctx, "bodies-b")
	require.NoError(t, err)
	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &pool}}

	const each = 5
	var wg sync.WaitGroup
	errs := make(chan error, 4*each)
	var names []string
	call := func(name string, clone func() error) {
		names = append(names, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := clone(); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	for i := range each {
		for _, tpl := range []struct {
			name string
			vm   interface {
				Clone(context.Context, *object.Folder, string, types.VirtualMachineCloneSpec) (*object.Task, error)
			}
		}{{"a", tplA}, {"b", tplB}} {
			name := fmt.Sprintf("clone-%s-%d", tpl.name, i)
			call(name, func() error {
				task, err := tpl.vm.Clone(ctx, folder, name, spec)
				if err == nil {
					_, err = task.WaitForResult(ctx)
				}
				return err
			})
		}
		for j, p := range parents {
			name := fmt.Sprintf("instant-%d-%d", j, i)
			call(name, func() error {
				_, err := instantClone(ctx, p.parent, types.VirtualMachineInstantCloneSpec{Name: name, Location: types.VirtualMachineRelocateSpec{Pool: &p.pool, Folder: types.NewReference(folder.Reference())}, Config: guestinfo(t, name, "")})
				return err
			})
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
	ran, overlaps := env.CloneBodies()
	assert.Equal(t, len(names), ran-ranBefore, "every clone's body went through the gate")
	assert.Zero(t, overlaps, "no clone body ran beside another clone body")
}
