package vcenter

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// GuestProgramExit reads, in one ListProcessesInGuest request (and the
// lookup of the guest's process manager), whether the guest program pid
// started with auth ended and its exit code (vCenter keeps an ended
// program's exit code for a few minutes). A pid the guest does not list
// is an error; a refused account is a vctypes.FaultInvalidGuestLogin.
// Each request is bounded by the client's request timeout.
func (c *Client) GuestProgramExit(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, pid int64) (exitCode int32, ended bool, err error) {
	code, ended, err := c.guestProgramExit(ctx, vim.MORef(vm), vim.GuestAuthOf(auth), pid)
	return code, ended, Classify(err)
}

func (c *Client) guestProgramExit(ctx context.Context, vm types.ManagedObjectReference, auth types.BaseGuestAuthentication, pid int64) (int32, bool, error) {
	if err := c.notConnected(); err != nil {
		return 0, false, err
	}
	pm, err := c.guestProcessManager(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("find guest process manager for %q: %w", c.vmName(vm), err)
	}
	res, err := methods.ListProcessesInGuest(ctx, c.vim, &types.ListProcessesInGuest{This: pm, Vm: vm, Auth: auth, Pids: []int64{pid}})
	if err != nil {
		return 0, false, fmt.Errorf("list process %d in %q: %w", pid, c.vmName(vm), err)
	}
	for _, p := range res.Returnval {
		if p.Pid == pid {
			return p.ExitCode, p.EndTime != nil, nil
		}
	}
	return 0, false, fmt.Errorf("list process %d in %q: the guest does not list it", pid, c.vmName(vm))
}
