//go:build !race

package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// TestDemoCloudInitModel: the demo's cloud-init job runs beside the
// guest-operations ones: its VM boots from the guestinfo userdata (the
// simulator plays cloud-init), the worker gets the CDS_CONFIG of its job
// from there, no guest operation is made on that VM, and the job finishes
// and its VM is destroyed like the others.
func TestDemoCloudInitModel(t *testing.T) {
	var (
		boots []vcsimtest.CloudInitBoot
		calls []vcsimtest.GuestCall
	)
	rep, stdout := runDemoOnce(t, func(i demo.Info) {
		boots, calls = i.Env.CloudInit.Boots(), i.Env.Guest.Calls()
	})

	cloudInit, guestOps := 0, 0
	for _, j := range rep.Jobs {
		require.NotEmpty(t, j.VM, "job %d got no VM", j.Seq)
		assert.False(t, j.Destroyed.IsZero(), "job %d VM %s destroyed", j.Seq, j.VM)
		launched := false
		for _, c := range calls {
			if c.VM == j.VM && c.ProgramPath == "/bin/echo" && c.Fault == nil {
				launched = true
			}
			// The Windows job's launch: PowerShell, checked by the fake
			// Windows guest (TestDemoWindowsModel).
			if j.Windows && c.VM == j.VM && c.Windows && c.Fault == nil && len(c.EnvVariables) > 0 {
				launched = true
			}
		}
		if !j.CloudInit && !j.Instant {
			guestOps++
			assert.True(t, launched, "guest-operations job %d launched through guest operations", j.Seq)
			continue
		}
		// The instant model's job (debian12-instant) boots from its
		// userdata too: a fork re-identifying from its own guestinfo, or
		// a clone while no parent is ready (internal/demo, instant.go).
		cloudInit++
		for _, c := range calls {
			assert.NotEqual(t, j.VM, c.VM, "guest operation %s on the cloud-init VM of job %d", c.ProgramPath, j.Seq)
		}
		var boot *vcsimtest.CloudInitBoot
		for i := range boots {
			if boots[i].VM == j.VM {
				boot = &boots[i]
			}
		}
		require.NotNil(t, boot, "the VM of job %d booted from its userdata", j.Seq)
		assert.Empty(t, boot.Err)
		wc, err := spawn.DecodeWorkerConfig(boot.CDSConfig)
		require.NoError(t, err)
		assert.Equal(t, j.JobID, wc.RunJobID, "the userdata carries the job's worker config")
		assert.Equal(t, j.IP, boot.IP, "the worker saw the address cloud-init configured")
	}
	assert.Equal(t, 2, cloudInit, "one cloud-init job and one instant-clone job in the mix of 6")
	assert.Equal(t, 4, guestOps)
	assert.Contains(t, stdout, "v2 cloud-init, flavor medium")
}
