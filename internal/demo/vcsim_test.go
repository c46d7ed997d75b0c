package demo

import (
	"bytes"
	"context"
	"log"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestSimulatorLogSilenced: while the demo's simulator runs, its
// standard-logger lines ("managed object not found: ...") are dropped; the
// standard logger's output is restored when it stops. It swaps the
// process-wide logger output: not parallel.
func TestSimulatorLogSilenced(t *testing.T) {
	var buf bytes.Buffer
	saved := log.Writer()
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(saved) })

	env, closeSim, err := startSimulator(vcsimtest.Options{NoTemplates: true})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gone := object.NewVirtualMachine(env.Admin.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-71"})
	_, err = gone.PowerOff(ctx) // a method on a VM the simulator does not hold
	require.Error(t, err, "no such vm")
	closeSim()

	assert.NotContains(t, buf.String(), "managed object not found")
	assert.Same(t, &buf, log.Writer(), "standard logger restored")
	log.Print("after the demo")
	assert.Contains(t, buf.String(), "after the demo")
}
