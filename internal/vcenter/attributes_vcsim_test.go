package vcenter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestVcsimFolderAttributeWriteReadBack: a folder attribute not yet
// defined reads as absent; once set by one client (one process) a second
// client reads it back, a second write replaces it (the last writer
// wins), and a second attribute is independent. The value sits on the
// folder new VMs go to and on no VM; the field is defined for folders
// only.
func TestVcsimFolderAttributeWriteReadBack(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	a, b := env.Client, env.NewClient(nil)
	t.Cleanup(func() { b.Close(ctx) })
	const name = "hatchery-vsphere.demand.test.warmpool-v2-debian12-abc123"

	_, ok, err := a.FolderAttribute(ctx, name)
	require.NoError(t, err)
	assert.False(t, ok, "a field never defined is absent")

	require.NoError(t, a.SetFolderAttribute(ctx, name, "first"))
	got, ok, err := b.FolderAttribute(ctx, name)
	require.NoError(t, err)
	require.True(t, ok, "the second client sees the value")
	assert.Equal(t, "first", got)

	require.NoError(t, b.SetFolderAttribute(ctx, name, "second"), "the field is defined already: the write reuses it")
	got, ok, err = a.FolderAttribute(ctx, name)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "second", got, "the last writer wins")

	_, ok, err = a.FolderAttribute(ctx, name+"-other")
	require.NoError(t, err)
	assert.False(t, ok, "another attribute is not set by this one")

	// Defined once, for folders only; the value is the VM folder's.
	m, err := object.GetCustomFieldsManager(env.Admin.Client)
	require.NoError(t, err)
	defs, err := m.Field(ctx)
	require.NoError(t, err)
	n := 0
	for _, d := range defs {
		if d.Name == name {
			n++
			assert.Equal(t, "Folder", d.ManagedObjectType)
		}
	}
	assert.Equal(t, 1, n, "one definition, whatever the number of writers")
	folder, err := a.LoadFolder(ctx)
	require.NoError(t, err)
	var f mo.Folder
	require.NoError(t, object.NewCommon(env.Admin.Client, vim.MORef(folder)).Properties(ctx, vim.MORef(folder), []string{"customValue"}, &f))
	assert.Len(t, f.CustomValue, 1, "the folder holds the one value")
}

// TestVcsimFolderAttributeAbsentOnFolder: a field defined (by another
// pool's write) but without a value on the folder reads as absent.
func TestVcsimFolderAttributeAbsentOnFolder(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	m, err := object.GetCustomFieldsManager(env.Admin.Client)
	require.NoError(t, err)
	_, err = m.Add(ctx, "hatchery-vsphere.demand.defined", "Folder", nil, nil)
	require.NoError(t, err)
	_, ok, err := env.Client.FolderAttribute(ctx, "hatchery-vsphere.demand.defined")
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestVcsimFolderAttributeTooLargeRefused: a value beyond
// MaxAttributeValue is refused with ErrAttributeTooLarge, naming the
// attribute and the sizes, and nothing is written (the attribute stays
// absent, a value already there stays).
func TestVcsimFolderAttributeTooLargeRefused(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	const name = "hatchery-vsphere.demand.big"
	err := env.Client.SetFolderAttribute(ctx, name, strings.Repeat("x", vcenter.MaxAttributeValue+1))
	require.Error(t, err)
	assert.ErrorIs(t, err, vcenter.ErrAttributeTooLarge)
	assert.Contains(t, err.Error(), name)
	assert.Contains(t, err.Error(), "4097 bytes, at most 4096")
	_, ok, err := env.Client.FolderAttribute(ctx, name)
	require.NoError(t, err)
	assert.False(t, ok, "nothing written")

	require.NoError(t, env.Client.SetFolderAttribute(ctx, name, strings.Repeat("y", vcenter.MaxAttributeValue)), "at the bound is written")
	require.Error(t, env.Client.SetFolderAttribute(ctx, name, strings.Repeat("z", vcenter.MaxAttributeValue+1)))
	got, ok, err := env.Client.FolderAttribute(ctx, name)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, strings.Repeat("y", vcenter.MaxAttributeValue), got, "the refused write left the value")
}
