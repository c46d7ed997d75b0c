package vsphere

import (
	"errors"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

func TestResolveFlavor(t *testing.T) {
	t.Parallel()
	three := []config.Flavor{
		{Name: "small", CPUs: 2, MemoryMB: 4096},
		{Name: "medium", CPUs: 4, MemoryMB: 8192},
		{Name: "large", CPUs: 8, MemoryMB: 16384},
	}
	v1 := func(flavor string) sdk.WorkerStarterWorkerModel {
		return sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "debian", Type: sdk.VSphere,
			ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12", Flavor: flavor}}}
	}
	v2 := func(jobFlavor, specFlavor string) sdk.WorkerStarterWorkerModel {
		m := capV2(jobFlavor)
		m.VSphereSpec.Flavor = specFlavor
		return m
	}
	flavorReq := []sdk.Requirement{{Type: sdk.BinaryRequirement, Value: "git"}, {Type: sdk.FlavorRequirement, Value: "medium"}}
	cases := []struct {
		name          string
		flavors       []config.Flavor
		defaultFlavor string
		model         sdk.WorkerStarterWorkerModel
		reqs          []sdk.Requirement
		want          string // "" = nil flavor
		wantErr       string
	}{
		{name: "job runs-on flavor wins over all", model: v2("large", "small"), reqs: flavorReq, defaultFlavor: "small", want: "large"},
		{name: "flavor requirement wins over model and default", model: v1("small"), reqs: flavorReq, defaultFlavor: "large", want: "medium"},
		{name: "v2 spec flavor wins over default", model: v2("", "large"), defaultFlavor: "small", want: "large"},
		{name: "v1 model flavor wins over default", model: v1("large"), defaultFlavor: "small", want: "large"},
		{name: "default flavor", model: v2("", ""), defaultFlavor: "medium", want: "medium"},
		{name: "none: template resources", model: v1(""), want: ""},
		{name: "case-insensitive", model: v2("LaRgE", ""), want: "large"},
		{name: "unknown job flavor is an error, no fallback to default", model: v2("huge", ""), defaultFlavor: "small",
			wantErr: `flavor "huge" is not defined in hatchery configuration (defined: small, medium, large)`},
		{name: "unknown with no flavors configured", flavors: []config.Flavor{}, model: v1("large"),
			wantErr: `flavor "large" is not defined in hatchery configuration (defined: none)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			flavors := three
			if tc.flavors != nil {
				flavors = tc.flavors
			}
			h := &HatcheryVSphere{cfg: &config.Config{Flavors: flavors, DefaultFlavor: tc.defaultFlavor}}
			got, err := h.resolveFlavor(tc.model, tc.reqs)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				var unknown *UnknownFlavorError
				require.True(t, errors.As(err, &unknown))
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			if tc.want == "" {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			require.Equal(t, tc.want, got.Name)
			got.CPUs = 999 // a copy: the configuration is unchanged
			for _, f := range flavors {
				require.NotEqual(t, int32(999), f.CPUs)
			}
		})
	}
}

func TestSmallestSmallerFlavor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		flavors []config.Flavor
		of      string
		want    string // "" = none
	}{
		{name: "large keeps small", flavors: capFlavors(), of: "large", want: "small"},
		{name: "xlarge keeps small, not medium", flavors: capFlavors(), of: "xlarge", want: "small"},
		{name: "smallest has no reserve", flavors: capFlavors(), of: "small", want: ""},
		{name: "declaration order does not matter", of: "big", want: "tiny", flavors: []config.Flavor{
			{Name: "big", CPUs: 8, MemoryMB: 8192}, {Name: "mid", CPUs: 4, MemoryMB: 4096}, {Name: "tiny", CPUs: 1, MemoryMB: 1024}}},
		{name: "cpu tie broken by less memory", of: "big", want: "lean", flavors: []config.Flavor{
			{Name: "fat", CPUs: 2, MemoryMB: 8192}, {Name: "lean", CPUs: 2, MemoryMB: 2048}, {Name: "big", CPUs: 8, MemoryMB: 8192}}},
		{name: "same cpus, less memory is not smaller", of: "wide", want: "", flavors: []config.Flavor{
			{Name: "narrow", CPUs: 4, MemoryMB: 2048}, {Name: "wide", CPUs: 4, MemoryMB: 16384}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := lookupFlavor(tc.flavors, tc.of)
			require.NoError(t, err)
			got, ok := smallestSmallerFlavor(tc.flavors, *f)
			if tc.want == "" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.want, got.Name)
		})
	}
}

func TestApplyFlavor(t *testing.T) {
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
		flavor      *config.Flavor
		devices     object.VirtualDeviceList
		wantCPUs    int32
		wantMemory  int64
		wantDiskKey int32 // 0 = no device change
		wantDiskGB  int64
		wantErr     string
	}{
		{name: "nil flavor changes nothing", devices: devices()},
		{name: "cpu and memory", flavor: &config.Flavor{Name: "large", CPUs: 8, MemoryMB: 16384}, devices: devices(), wantCPUs: 8, wantMemory: 16384},
		{name: "disk grows the first disk only", flavor: &config.Flavor{Name: "big", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 50},
			devices: devices(), wantCPUs: 4, wantMemory: 8192, wantDiskKey: 2000, wantDiskGB: 50},
		{name: "same disk size is no device change", flavor: &config.Flavor{Name: "same", CPUs: 4, MemoryMB: 8192, DiskSizeGB: 20},
			devices: devices(), wantCPUs: 4, wantMemory: 8192},
		{name: "disk size only in KB", flavor: &config.Flavor{Name: "kb", CPUs: 2, MemoryMB: 2048, DiskSizeGB: 30},
			devices:  object.VirtualDeviceList{&types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: 7}, CapacityInKB: 20 << 20}},
			wantCPUs: 2, wantMemory: 2048, wantDiskKey: 7, wantDiskGB: 30},
		{name: "shrink refused", flavor: &config.Flavor{Name: "tiny", CPUs: 1, MemoryMB: 1024, DiskSizeGB: 10},
			devices: devices(), wantErr: `apply flavor "tiny": diskSizeGB 10 is smaller than the template's first disk`},
		{name: "disk size without a disk refused", flavor: &config.Flavor{Name: "d", CPUs: 1, MemoryMB: 1024, DiskSizeGB: 10},
			devices: object.VirtualDeviceList{&types.VirtualVmxnet3{}}, wantErr: "has no virtual disk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := types.VirtualMachineConfigSpec{Annotation: "kept"}
			err := applyFlavor(&spec, tc.flavor, tc.devices)
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
