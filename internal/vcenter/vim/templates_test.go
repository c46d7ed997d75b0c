package vim

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vmware/govmomi/vim25/types"
)

// TestTemplateDevicesCoalesceConcurrentMisses: a burst of clones of a
// template not read yet reads it once; every clone gets its own copy of
// the device list.
func TestTemplateDevicesCoalesceConcurrentMisses(t *testing.T) {
	t.Parallel()
	td := NewTemplateDevices(time.Now)
	tmpl := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-tmpl"}
	release := make(chan struct{})
	var reads atomic.Int32
	read := func(context.Context, types.ManagedObjectReference) (TemplateInfo, error) {
		reads.Add(1)
		<-release
		return TemplateInfo{Devices: testutil.TemplateDevices(1)}, nil
	}
	const n = 20
	var wg sync.WaitGroup
	got := make([]TemplateInfo, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			info, err := td.Load(context.Background(), tmpl, read)
			assert.NoError(t, err)
			got[i] = info
		}(i)
	}
	require.Eventually(t, func() bool { return td.loading.Len() == 1 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), reads.Load(), "read once for the burst")
	require.Len(t, got[0].Devices, 2)
	require.Len(t, got[1].Devices, 2)
	assert.NotSame(t, got[0].Devices[1], got[1].Devices[1], "each caller gets its own copy")
}
