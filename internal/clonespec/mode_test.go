package clonespec

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/vim25/types"
)

func ref(kind, id string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: kind, Value: id}
}

func TestDecideCloneMode(t *testing.T) {
	t.Parallel()
	cur := ref("VirtualMachineSnapshot", "snapshot-2")
	other := ref("VirtualMachineSnapshot", "snapshot-1")
	ti := TemplateInfo{
		Devices:         testutil.TemplateDevices(1), // a 10 GB disk
		CurrentSnapshot: &cur,
		Snapshots:       []TemplateSnapshot{{Name: "golden", Ref: other}, {Name: "base", Ref: cur}},
	}
	tests := []struct {
		name     string
		ti       TemplateInfo
		flavor   *config.Flavor
		snapshot string
		mode     string
		snap     *types.ManagedObjectReference
		reason   string
	}{
		{name: "current snapshot", ti: ti, mode: ModeLinked, snap: &cur},
		{name: "named snapshot", ti: ti, snapshot: "golden", mode: ModeLinked, snap: &other},
		{name: "named snapshot missing", ti: ti, snapshot: "nope", mode: ModeFull, reason: `no snapshot named "nope"`},
		{name: "no snapshot", ti: TemplateInfo{Devices: ti.Devices}, mode: ModeFull, reason: "template has no snapshot"},
		{name: "flavor keeps the disk", ti: ti, flavor: &config.Flavor{Name: "s", CPUs: 1, MemoryMB: 512, DiskSizeGB: 10}, mode: ModeLinked, snap: &cur},
		{name: "flavor grows the disk", ti: ti, flavor: &config.Flavor{Name: "l", CPUs: 1, MemoryMB: 512, DiskSizeGB: 20}, mode: ModeFull, reason: `flavor "l" grows the disk`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := decideCloneMode(tt.ti, tt.flavor, tt.snapshot)
			assert.Equal(t, tt.mode, d.Mode)
			assert.Equal(t, tt.snap, d.Snapshot)
			if tt.reason == "" {
				assert.Empty(t, d.Reason)
			} else {
				assert.Contains(t, d.Reason, tt.reason)
			}
		})
	}
}
