package vcheck

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// These tests use the project's simulator extended with vCenter's guest
// file transfers (vcsimtest guest_files.go: InitiateFileTransferFromGuest
// hands out a URL of the guest's file, DeleteFileInGuest removes it; the
// fake guest's programs write the word the check's program writes).

// TestGuestProgramOutputReadBack: the guest program line passes only
// once the word the program wrote is read back from the guest; the file
// is deleted afterwards.
func TestGuestProgramOutputReadBack(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "out"})
	t.Logf("report:\n%s", text(rep))
	got := lines(rep, "guest program")
	require.Len(t, got, 1)
	assert.Equal(t, Pass, got[0].Status)
	assert.Contains(t, got[0].Detail, "its output read back from /tmp/hatchery-vsphere-check-out.out")
	var vm string
	for _, c := range env.Guest.Calls() {
		if c.Arguments == `-c "printf %s out-out > /tmp/hatchery-vsphere-check-out.out"` {
			vm = c.VM
		}
	}
	require.NotEmpty(t, vm, "the program that writes the output ran")
	_, left := env.Guest.File(vm, "/tmp/hatchery-vsphere-check-out.out")
	assert.False(t, left, "the output file is deleted")
	assert.False(t, rep.Failed())
}

// TestGuestProgramWrongOutputFails: a guest whose program exits 0 but
// writes something else fails the line, saying what it read.
func TestGuestProgramWrongOutputFails(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	env.Guest.SetWrites(func(vcsimtest.GuestCall, string) string { return "garbage" })
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "bad"})
	t.Logf("report:\n%s", text(rep))
	got := lines(rep, "guest program")
	require.Len(t, got, 1)
	assert.Equal(t, Fail, got[0].Status)
	assert.Contains(t, got[0].Detail, `holds "garbage", not "out-bad"`)
	assert.True(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestGuestProgramOutputUnsupported: a vCenter that refuses guest file
// transfers as not supported (injected NotSupported) leaves the line
// unsupported, never pass, though the program's exit code was 0.
func TestGuestProgramOutputUnsupported(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	env.InjectFault(vcsimtest.Fault{Method: "InitiateFileTransferFromGuest", Err: new(types.NotSupported)})
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "nofile"})
	t.Logf("report:\n%s", text(rep))
	got := lines(rep, "guest program")
	require.Len(t, got, 1)
	assert.Equal(t, Unsupported, got[0].Status)
	assert.Contains(t, got[0].Detail, "exit code 0; its output not read back")
	assert.Empty(t, scratchLeft(t, env))
}
