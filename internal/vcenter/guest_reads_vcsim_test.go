package vcenter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// readyGuest clones the default template into a powered-on VM named
// name (govmomi's own clone call, so that the test does not depend on the
// port's clone) and waits for its guest through the port; its reference.
func readyGuest(t *testing.T, env *vcsimtest.Env, name string) vctypes.Ref {
	t.Helper()
	ctx := testCtx(t)
	c := env.Client
	tpl, folder := cloneSource(t, ctx, c)
	pool, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	p := vim.MORef(pool)
	task, err := object.NewVirtualMachine(c.Vim25(), vim.MORef(tpl)).Clone(ctx, object.NewFolder(c.Vim25(), vim.MORef(folder)), name,
		types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &p}, PowerOn: true})
	require.NoError(t, err)
	info, err := task.WaitForResult(ctx)
	require.NoError(t, err)
	vm := vim.RefOf(info.Result.(types.ManagedObjectReference))
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vm))
	return vm
}

// TestGuestToolsStatusInOurTerms: the tools status of a running guest is
// vctypes.ToolsOK (the simulator's extension reports toolsOk once the
// guest runs), a VM that does not exist is FaultNotFound.
func TestGuestToolsStatusInOurTerms(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := readyGuest(t, env, "tools-1")

	st, err := env.Client.GuestToolsStatus(ctx, vm)
	require.NoError(t, err)
	assert.Equal(t, vctypes.ToolsOK, st)

	_, err = env.Client.GuestToolsStatus(ctx, vctypes.Ref{Type: "VirtualMachine", Value: "vm-missing"})
	require.Error(t, err)
	assert.ErrorIs(t, err, vctypes.FaultNotFound)
}

// TestGuestProgramExitInOurTerms: a program started through the port
// ends with the exit code the guest gave it; a wrong password is
// FaultInvalidGuestLogin, its text without the password; a pid the guest
// does not list is an error.
func TestGuestProgramExitInOurTerms(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := readyGuest(t, env, "exit-1")
	env.Guest.SetExitCode(func(vcsimtest.GuestCall) int32 { return 3 })

	pid, err := env.Client.StartProgramInGuest(ctx, vm, guestAuth, vctypes.GuestProgram{Path: "/bin/false"})
	require.NoError(t, err)
	code, ended, err := env.Client.GuestProgramExit(ctx, vm, guestAuth, pid)
	require.NoError(t, err)
	assert.True(t, ended)
	assert.Equal(t, int32(3), code)

	wrong := &vctypes.GuestAuth{Username: vcsimtest.DefaultGuestUser, Password: "not-the-guest-secret"}
	_, _, err = env.Client.GuestProgramExit(ctx, vm, wrong, pid)
	require.Error(t, err)
	assert.ErrorIs(t, err, vctypes.FaultInvalidGuestLogin)
	assert.NotContains(t, err.Error(), wrong.Password)

	_, _, err = env.Client.GuestProgramExit(ctx, vm, guestAuth, pid+1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not list it")
}

// TestReadGuestFileInOurTerms: a file a guest program wrote is read back
// through vCenter's guest file transfer (at most maxBytes of it) and
// stays until DeleteGuestFile; a wrong password is FaultInvalidGuestLogin
// and a vCenter refusing transfers FaultNotSupported, neither error
// carrying the password; a deleted file is an error.
func TestReadGuestFileInOurTerms(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	vm := readyGuest(t, env, "files-1")
	_, err := env.Client.StartProgramInGuest(ctx, vm, guestAuth, vctypes.GuestProgram{Path: "/bin/sh", Args: `-c "printf %s word-42 > /tmp/out"`})
	require.NoError(t, err)

	b, err := env.Client.ReadGuestFile(ctx, vm, guestAuth, "/tmp/out", 4096)
	require.NoError(t, err)
	assert.Equal(t, "word-42", string(b))
	b, err = env.Client.ReadGuestFile(ctx, vm, guestAuth, "/tmp/out", 4)
	require.NoError(t, err)
	assert.Equal(t, "word", string(b), "at most maxBytes")
	_, ok := env.Guest.File("files-1", "/tmp/out")
	assert.True(t, ok, "a read leaves the file")

	wrong := &vctypes.GuestAuth{Username: vcsimtest.DefaultGuestUser, Password: "not-the-guest-secret"}
	_, err = env.Client.ReadGuestFile(ctx, vm, wrong, "/tmp/out", 4096)
	require.Error(t, err)
	assert.ErrorIs(t, err, vctypes.FaultInvalidGuestLogin)
	assert.NotContains(t, err.Error(), wrong.Password)
	assert.NotContains(t, err.Error(), vcsimtest.DefaultGuestPassword)

	env.InjectFault(vcsimtest.Fault{Method: "InitiateFileTransferFromGuest", Err: new(types.NotSupported), Max: 1})
	_, err = env.Client.ReadGuestFile(ctx, vm, guestAuth, "/tmp/out", 4096)
	require.Error(t, err)
	assert.ErrorIs(t, err, vctypes.FaultNotSupported)
	assert.NotContains(t, err.Error(), vcsimtest.DefaultGuestPassword)

	require.NoError(t, env.Client.DeleteGuestFile(ctx, vm, guestAuth, "/tmp/out"))
	_, ok = env.Guest.File("files-1", "/tmp/out")
	assert.False(t, ok, "deleted")
	_, err = env.Client.ReadGuestFile(ctx, vm, guestAuth, "/tmp/out", 4096)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/tmp/out")
	assert.Error(t, env.Client.DeleteGuestFile(ctx, vm, wrong, "/tmp/out"))
}
