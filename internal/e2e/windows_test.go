//go:build !race

package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestDemoWindowsModel: the demo's Windows job runs beside the others: its
// VM is a clone of the Windows template, a (simulated) Windows guest
// accepted its PowerShell probe and launch (the fake guest refuses
// anything else), the launch's environment carried the job's worker
// config and a script downloading windows/amd64, and the job finishes and
// its VM is destroyed like the others.
func TestDemoWindowsModel(t *testing.T) {
	var (
		launches []vcsimtest.WindowsLaunch
		calls    []vcsimtest.GuestCall
	)
	rep, stdout := runDemoOnce(t, func(i demo.Info) {
		launches, calls = i.Env.Guest.WindowsLaunches(), i.Env.Guest.Calls()
	})

	windows := 0
	for _, j := range rep.Jobs {
		if !j.Windows {
			for _, c := range calls {
				if c.VM == j.VM {
					assert.False(t, c.Windows, "job %d's VM %s is no Windows guest", j.Seq, j.VM)
				}
			}
			continue
		}
		windows++
		assert.True(t, strings.HasPrefix(j.VM, "win2022-"), j.VM)
		assert.False(t, j.Destroyed.IsZero(), "job %d VM %s destroyed", j.Seq, j.VM)
		var mine []vcsimtest.WindowsLaunch
		for _, l := range launches {
			if l.VM == j.VM {
				mine = append(mine, l)
			}
		}
		require.Len(t, mine, 1, "one PowerShell launch in %s", j.VM)
		assert.Equal(t, j.JobID, mine[0].Config.RunJobID, "the launch's CDS_CONFIG is the job's")
		assert.Contains(t, mine[0].Script, "/download/worker/windows/amd64")
		assert.Contains(t, mine[0].Script, "Stop-Computer -Force")
		for _, c := range calls {
			if c.VM == j.VM {
				assert.True(t, c.Windows)
				assert.Nil(t, c.Fault, "%s %s", c.ProgramPath, c.Arguments)
			}
		}
	}
	assert.Equal(t, 1, windows, "one Windows job in the mix of 6")
	assert.Contains(t, stdout, "v2 windows, flavor large")
	assert.Contains(t, stdout, "/download/worker/windows/amd64")
}
