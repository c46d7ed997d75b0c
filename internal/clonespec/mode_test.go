package clonespec

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/stretchr/testify/assert"
)

// tref is a reference in the project's terms.
func tref(kind, id string) vctypes.Ref { return vctypes.Ref{Type: kind, Value: id} }

func TestDecideCloneMode(t *testing.T) {
	t.Parallel()
	cur := tref("VirtualMachineSnapshot", "snapshot-2")
	other := tref("VirtualMachineSnapshot", "snapshot-1")
	ti := vctypes.Template{
		Disks:           []vctypes.Disk{{CapacityBytes: 10 << 30}}, // a 10 GB disk
		CurrentSnapshot: cur,
		Snapshots:       []vctypes.Snapshot{{Name: "golden", Ref: other}, {Name: "base", Ref: cur}},
	}
	tests := []struct {
		name     string
		ti       vctypes.Template
		flavor   *config.Flavor
		snapshot string
		mode     string
		snap     vctypes.Ref
		reason   string
	}{
		{name: "current snapshot", ti: ti, mode: ModeLinked, snap: cur},
		{name: "named snapshot", ti: ti, snapshot: "golden", mode: ModeLinked, snap: other},
		{name: "named snapshot missing", ti: ti, snapshot: "nope", mode: ModeFull, reason: `no snapshot named "nope"`},
		{name: "no snapshot", ti: vctypes.Template{Disks: ti.Disks}, mode: ModeFull, reason: "template has no snapshot"},
		{name: "flavor keeps the disk", ti: ti, flavor: &config.Flavor{Name: "s", CPUs: 1, MemoryMB: 512, DiskSizeGB: 10}, mode: ModeLinked, snap: cur},
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
