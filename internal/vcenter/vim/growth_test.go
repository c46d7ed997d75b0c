package vim

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// TestApplyGrowth: the flavor growth rule (CPUs, memory, the first disk
// grows, never shrinks), moved here from internal/clonespec with the rule.
func TestApplyGrowth(t *testing.T) {
	t.Parallel()
	const gib = int64(1) << 30
	disk := func(key int32, bytes int64) *types.VirtualDisk {
		return &types.VirtualDisk{
			VirtualDevice:   types.VirtualDevice{Key: key},
			CapacityInKB:    bytes / 1024,
			CapacityInBytes: bytes,
		}
	}
	devices := func() object.VirtualDeviceList {
		return object.VirtualDeviceList{
			&types.ParaVirtualSCSIController{},
			disk(2000, 20*gib),
			disk(2001, 10*gib),
			&types.VirtualVmxnet3{},
		}
	}
	cases := []struct {
		name        string
		flavor      *vctypes.Growth
		devices     object.VirtualDeviceList
		wantCPUs    int32
		wantMemory  int64
		wantDiskKey int32 // 0 = no device change
		wantDiskGB  int64
		wantErr     string
	}{
		{name: "nil flavor changes nothing", devices: devices()},
		{name: "cpu and memory", flavor: &vctypes.Growth{Flavor: "large", CPUs: 8, MemoryMB: 16384}, devices: devices(), wantCPUs: 8, wantMemory: 16384},
		{name: "disk grows the first disk only", flavor: &vctypes.Growth{Flavor: "big", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 50},
			devices: devices(), wantCPUs: 4, wantMemory: 8192, wantDiskKey: 2000, wantDiskGB: 50},
		{name: "same disk size is no device change", flavor: &vctypes.Growth{Flavor: "same", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 20},
			devices: devices(), wantCPUs: 4, wantMemory: 8192},
		{name: "disk size only in KB", flavor: &vctypes.Growth{Flavor: "kb", CPUs: 2, MemoryMB: 2048, DiskSizeGB: 30},
			devices:  object.VirtualDeviceList{&types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: 7}, CapacityInKB: 20 << 20}},
			wantCPUs: 2, wantMemory: 2048, wantDiskKey: 7, wantDiskGB: 30},
		{name: "shrink refused", flavor: &vctypes.Growth{Flavor: "tiny", CPUs: 1, MemoryMB: 1024, DiskSizeGB: 10},
			devices: devices(), wantErr: `apply flavor "tiny": diskSizeGB 10 is smaller than the template's first disk`},
		{name: "disk size without a disk refused", flavor: &vctypes.Growth{Flavor: "d", CPUs: 1, MemoryMB: 1024, DiskSizeGB: 10},
			devices: object.VirtualDeviceList{&types.VirtualVmxnet3{}}, wantErr: "has no virtual disk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := types.VirtualMachineConfigSpec{Annotation: "kept"}
			err := ApplyGrowth(&spec, tc.flavor, tc.devices)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Zero(t, spec.NumCPUs, "nothing applied on error")
				require.Empty(t, spec.DeviceChange)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "kept", spec.Annotation)
			require.Equal(t, tc.wantCPUs, spec.NumCPUs)
			require.Equal(t, tc.wantMemory, spec.MemoryMB)
			if tc.wantDiskKey == 0 {
				require.Empty(t, spec.DeviceChange)
				return
			}
			require.Len(t, spec.DeviceChange, 1)
			change := spec.DeviceChange[0].GetVirtualDeviceConfigSpec()
			require.Equal(t, types.VirtualDeviceConfigSpecOperationEdit, change.Operation)
			d, ok := change.Device.(*types.VirtualDisk)
			require.True(t, ok)
			require.Equal(t, tc.wantDiskKey, d.Key)
			require.Equal(t, tc.wantDiskGB*gib, d.CapacityInBytes)
			require.Equal(t, tc.wantDiskGB*gib/1024, d.CapacityInKB)
			// The template's device list is left as it was.
			orig := tc.devices.FindByKey(tc.wantDiskKey).(*types.VirtualDisk)
			require.NotEqual(t, tc.wantDiskGB*gib/1024, orig.CapacityInKB)
		})
	}
}
