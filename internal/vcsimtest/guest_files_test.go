package vcsimtest_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/guest"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// TestGuestFilesTransferWhatAProgramWrote: the fake guest's program that
// writes a word to a file leaves the file, which vCenter's guest file
// transfer hands out (a URL read with a GET) to the guest's account only,
// and DeleteFileInGuest removes (FileNotFound after).
func TestGuestFilesTransferWhatAProgramWrote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	tpl, folder, pool := cloneFixture(ctx, t, env)
	task, err := tpl.Clone(ctx, folder, "files-vm", types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &pool}, PowerOn: true})
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx)
	require.NoError(t, err)
	vm := info.Result.(types.ManagedObjectReference)
	require.Eventually(t, func() bool { return env.MustInspect("files-vm").GuestOperationsReady }, 30*time.Second, 5*time.Millisecond)

	_, err = env.Client.StartProgramInGuest(ctx, vim.RefOf(vm), guestAuth(), vctypes.GuestProgram{
		Path: "/bin/sh", Args: `-c "printf %s word-1 > /tmp/out"`})
	require.NoError(t, err)
	got, ok := env.Guest.File("files-vm", "/tmp/out")
	require.True(t, ok)
	assert.Equal(t, "word-1", got)

	vc := env.Client.Vim25()
	fm, err := guest.NewOperationsManager(vc, vm).FileManager(ctx)
	require.NoError(t, err)
	_, err = fm.InitiateFileTransferFromGuest(ctx, &types.NamePasswordAuthentication{Username: vcsimtest.DefaultGuestUser, Password: "wrong"}, "/tmp/out")
	assert.True(t, fault.Is(err, &types.InvalidGuestLogin{}), "%v", err)
	ft, err := fm.InitiateFileTransferFromGuest(ctx, vim.GuestAuthOf(guestAuth()), "/tmp/out")
	require.NoError(t, err)
	u, err := fm.TransferURL(ctx, ft.Url)
	require.NoError(t, err)
	body, _, err := vc.Download(ctx, u, &soap.DefaultDownload)
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	assert.Equal(t, "word-1", string(b))

	require.NoError(t, fm.DeleteFile(ctx, vim.GuestAuthOf(guestAuth()), "/tmp/out"))
	_, ok = env.Guest.File("files-vm", "/tmp/out")
	assert.False(t, ok)
	_, err = fm.InitiateFileTransferFromGuest(ctx, vim.GuestAuthOf(guestAuth()), "/tmp/out")
	assert.True(t, fault.Is(err, &types.FileNotFound{}), "%v", err)
}
