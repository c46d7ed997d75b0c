package custody

import (
	"context"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// userdataVMs are the VMs of this run whose guestinfo still holds a
// worker token, by VM name: removed once the API lists the worker or the
// VM is gone. A restart forgets them: their tokens stay until the VMs are
// destroyed (docs/cloud-init.md).
type userdataVMs struct {
	mu  sync.Mutex
	vms map[string]vctypes.Ref
}

// TrackUserdata records that the guestinfo of vm, named name, holds a
// worker token, until ScrubUserdata or ForgetUserdata.
func (c *Custody) TrackUserdata(name string, vm vctypes.Ref) {
	c.userdata.mu.Lock()
	defer c.userdata.mu.Unlock()
	if c.userdata.vms == nil {
		c.userdata.vms = map[string]vctypes.Ref{}
	}
	c.userdata.vms[name] = vm
}

// ForgetUserdata drops the VM named name from the VMs holding a token
// (destroyed, or its guestinfo cleared another way).
func (c *Custody) ForgetUserdata(name string) {
	c.userdata.mu.Lock()
	defer c.userdata.mu.Unlock()
	delete(c.userdata.vms, name)
}

// Userdata returns a copy of the VMs whose guestinfo still holds a worker
// token, by name.
func (c *Custody) Userdata() map[string]vctypes.Ref {
	c.userdata.mu.Lock()
	defer c.userdata.mu.Unlock()
	out := make(map[string]vctypes.Ref, len(c.userdata.vms))
	for k, v := range c.userdata.vms {
		out[k] = v
	}
	return out
}

// ScrubUserdata removes the userdata (and the worker token in it) from
// vm, a VM of ours named name, on a context detached from ctx's
// cancellation and bounded by ScrubTimeout; why says what triggered it,
// for the log. The VM is no longer tracked afterwards. A failure is
// logged: the VM keeps the token until it is destroyed.
func (c *Custody) ScrubUserdata(ctx context.Context, vm vctypes.Ref, name, why string) {
	defer c.ForgetUserdata(name)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ScrubTimeout)
	defer cancel()
	if err := c.Port.ReconfigureVirtualMachine(sctx, vm, vctypes.ConfigChange{Options: cloudinit.ScrubOptions()}); err != nil {
		c.Log.Warn("remove worker userdata failed", logkey.VM, name, logkey.Detail, why, logkey.Err, err)
		return
	}
	c.Log.Info("worker userdata removed", logkey.VM, name, logkey.Detail, why)
}
