package vcsimtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

func TestStartDefaults(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	assert.Equal(t, "127.0.0.1", env.URL.Hostname())
	assert.Equal(t, "https", env.URL.Scheme)
	pass, _ := env.URL.User.Password()
	assert.Equal(t, vcsimtest.DefaultPassword, pass)
	assert.Equal(t, []string{vcsimtest.DefaultTemplate}, env.Templates)
	tpl := env.MustInspect(vcsimtest.DefaultTemplate)
	assert.True(t, tpl.Template)
	assert.Equal(t, int32(2), tpl.NumCPU)
	assert.Equal(t, int32(4096), tpl.MemoryMB)

	cfg := env.Config()
	assert.Equal(t, vcsimtest.ResourcePoolPath, cfg.ResourcePoolString)
	assert.Equal(t, vcsimtest.CardName, cfg.CardName)
	assert.False(t, cfg.Insecure)
	assert.NotEmpty(t, cfg.CAFile)
}

// TestNewAndClose: an Env built outside a test serves until Close, which
// ends its context, joins its goroutines, stops the server and can be
// called twice.
func TestNewAndClose(t *testing.T) {
	t.Parallel()
	env, err := vcsimtest.New(vcsimtest.Options{})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			env.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vms, err := env.Client.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.Len(t, vms, 1, "the default template")
	extra, err := env.TryClient(nil)
	require.NoError(t, err)
	cfg := env.Config()
	inv := env.InventoryOver(cfg, extra) // its loop is joined by Close
	env.WaitInventory(inv)

	env.Close()
	closed = true
	require.Error(t, env.Context().Err(), "context ended")
	env.Close() // idempotent
	_, err = vcenter.Dial(ctx, env.ClientConfig())
	require.Error(t, err, "the server no longer answers")
}

func TestTemplatesOption(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{Templates: []vcsimtest.Template{
		{Name: "ubuntu24", CPUs: 4, MemoryMB: 8192, Annotation: "foreign notes"},
		{Name: "debian12"},
	}})
	u := env.MustInspect("ubuntu24")
	assert.Equal(t, int32(4), u.NumCPU)
	assert.Equal(t, "foreign notes", u.Annotation)
	_, ok := env.Inspect("nope")
	assert.False(t, ok)
}

func TestForeignVMsAreFast(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	start := time.Now()
	refs := env.AddForeignVMs("foreign-", 5000)
	elapsed := time.Since(start)
	require.Len(t, refs, 5000)
	assert.Less(t, elapsed, 5*time.Second, "5,000 fixture VMs")
	t.Logf("5000 foreign VMs in %v", elapsed)
	assert.Equal(t, "10.200.19.136", env.MustInspect("foreign-04999").IPAddress)
	// Listing 5,000 VMs under -race on a loaded 2-core machine can exceed
	// the 15 s request timeout: BenchmarkListVirtualMachines5000 lists them.
}

func TestForeignVMsAreListed(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true, ForeignVMs: 300})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vms, err := env.Client.ListVirtualMachines(ctx)
	require.NoError(t, err)
	require.Len(t, vms, 300)
	v := inventory.VMFromInfo(vms[0])
	assert.True(t, v.PoweredOn())
	assert.Nil(t, v.Annotation)
	assert.Len(t, v.IPAddresses, 1)

	// More can be added later, also seen by the client's reused view.
	env.AddVMs([]vcsimtest.ForeignVM{{Name: "owned", Annotation: inventory.Annotation{HatcheryName: "h"}.Marshal(), NumCPU: 2, MemoryMB: 2048}})
	vms, err = env.Client.ListVirtualMachines(ctx)
	require.NoError(t, err)
	assert.Len(t, vms, 301)
	st := env.MustInspect("owned")
	assert.Equal(t, types.VirtualMachinePowerStatePoweredOff, st.PowerState)
}

func TestFakeGuestWaitForCallsEndsWithContext(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	calls, err := env.Guest.WaitForCalls(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, calls)
}

// BenchmarkListVirtualMachines5000 lists 5,000 VMs through the client:
// one RetrievePropertiesEx of leaf properties per list.
func BenchmarkListVirtualMachines5000(b *testing.B) {
	env := vcsimtest.Start(b, vcsimtest.Options{NoTemplates: true})
	env.AddForeignVMs("foreign-", 5000)
	ctx := context.Background()
	before := env.Client.Stats()
	b.ResetTimer()
	for b.Loop() {
		vms, err := env.Client.ListVirtualMachines(ctx)
		if err != nil || len(vms) != 5000 {
			b.Fatalf("list: %d vms, %v", len(vms), err)
		}
	}
	d := env.Client.Stats().Sub(before).Total()
	b.ReportMetric(float64(d.Requests)/float64(b.N), "soap-req/op")
	b.ReportMetric(float64(d.ResponseBytes)/float64(b.N), "soap-resp-B/op")
}
