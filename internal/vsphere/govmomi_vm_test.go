package vsphere_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// testCtx bounds a test's vCenter calls.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cloneSpec is a worker clone spec: placement, the annotation and its
// mirror, optional CPU/RAM override and a Linux customization with a fixed
// IP when ip is set.
func cloneSpec(t *testing.T, ctx context.Context, c *vsphere.GovmomiClient, a vsphere.Annotation, cpus int32, memMB int64, ip string) *types.VirtualMachineCloneSpec {
	t.Helper()
	pool, err := c.LoadResourcePool(ctx)
	require.NoError(t, err)
	ds, err := c.LoadDatastore(ctx, vcsimtest.DatastoreName)
	require.NoError(t, err)
	poolRef, dsRef := pool.Reference(), ds.Reference()
	cfg := &types.VirtualMachineConfigSpec{NumCPUs: cpus, MemoryMB: memMB}
	a.ApplyTo(cfg)
	spec := &types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &poolRef, Datastore: &dsRef},
		Config:   cfg,
	}
	if ip != "" {
		spec.Customization = &types.CustomizationSpec{
			Identity: &types.CustomizationLinuxPrep{
				HostName: &types.CustomizationFixedName{Name: "worker"},
				Domain:   "local",
			},
			GlobalIPSettings: types.CustomizationGlobalIPSettings{DnsServerList: []string{"10.0.0.53"}},
			NicSettingMap: []types.CustomizationAdapterMapping{{
				Adapter: types.CustomizationIPSettings{
					Ip:         &types.CustomizationFixedIp{IpAddress: ip},
					SubnetMask: "255.255.255.0",
					Gateway:    []string{"10.0.0.1"},
				},
			}},
		}
	}
	return spec
}

// cloneWorker clones the default template into name and returns the VM.
func cloneWorker(t *testing.T, ctx context.Context, env *vcsimtest.Env, name string, ip string) *object.VirtualMachine {
	t.Helper()
	c := env.Client
	tpl, err := c.LoadVirtualMachine(ctx, vcsimtest.DefaultTemplate)
	require.NoError(t, err)
	folder, err := c.LoadFolder(ctx)
	require.NoError(t, err)
	a := vsphere.Annotation{HatcheryName: "hatch", WorkerName: name, VMwareModelPath: vcsimtest.DefaultTemplate, Created: time.Now().UTC().Truncate(time.Second)}
	ref, err := c.CloneVirtualMachine(ctx, tpl, folder, name, cloneSpec(t, ctx, c, a, 0, 0, ip))
	require.NoError(t, err)
	return c.NewVirtualMachine(*ref)
}

func TestCloneStartGuest(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx := testCtx(t)
	c := env.Client

	vm := cloneWorker(t, ctx, env, "worker-1", "10.0.0.10")
	require.NoError(t, c.StartVirtualMachine(ctx, vm))
	require.NoError(t, c.WaitForGuestOperationsReady(ctx, vm))
	ip, err := c.WaitForVirtualMachineIP(ctx, vm, "10.0.0.10")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.10", ip)

	pid, err := c.StartProgramInGuest(ctx, vm,
		&types.NamePasswordAuthentication{Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword},
		&types.GuestProgramSpec{ProgramPath: "/bin/echo", Arguments: "-n ;echo hi", EnvVariables: []string{"CDS_CONFIG=abc"}})
	require.NoError(t, err)
	assert.NotZero(t, pid)
	calls := env.Guest.CallsFor("worker-1")
	require.Len(t, calls, 1)
	assert.Equal(t, "/bin/echo", calls[0].ProgramPath)
	assert.Equal(t, "-n ;echo hi", calls[0].Arguments)
	assert.Equal(t, []string{"CDS_CONFIG=abc"}, calls[0].EnvVariables)
	assert.Equal(t, pid, calls[0].Pid)
}
