package vsphere

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawnfault"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
)

// TestProvisioningQuarantine: a warm pool's provisionings are spawns for the
// quarantine book. After quarantineThreshold template failures the pool stops
// cloning that template (no clone is attempted; a spawn of the template is
// refused at the gate too), another template is not slowed, and once the
// back-off is over one provisioning probes the template: its success lifts
// the quarantine.
func TestProvisioningQuarantine(t *testing.T) {
	t.Parallel()
	cfg := warmConfig()
	cfg.QuarantineThreshold = 2
	e := newWarmEnv(t, cfg, []inventory.VM{warmTpl("broken"), warmTpl("good")}, nil)
	var mu sync.Mutex
	now := warmNow
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e.h.custody.Quarantine = quarantine.New(quarantinePolicy(cfg), clock)

	fixed, taken := false, false
	clones := map[string]int{}
	e.h.pool.Clone = poolClone(func(_ context.Context, tpl modelref.Template, name string, _ *inventory.Annotation, _ *config.Flavor) (vctypes.Ref, error) {
		template := tpl.Name
		clones[template]++
		if taken {
			return vctypes.Ref{}, fmt.Errorf("clone: %w", task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: &types.DuplicateName{Name: name}}})
		}
		if template == "broken" && !fixed {
			return vctypes.Ref{}, spawnfault.MarkTemplate(errors.New("guest never ready"))
		}
		return warmRef(name), nil
	})
	e.vs.EXPECT().WaitForVirtualMachineIP(gomock.Any(), gomock.Any(), gomock.Any()).Return("10.0.0.9", nil).AnyTimes()
	e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
	n := 0
	provision := func(template string) {
		n++
		name := fmt.Sprintf("warmpool-v2-%s-%d", template, n)
		e.h.pool.ProvisionOne(context.Background(), warmpool.Task{Key: warmpool.Key{Model: template}, Template: modelref.Template{Name: template}, Name: name})
	}
	ctx := context.Background()

	for range 4 {
		provision("broken")
	}
	assert.Equal(t, 2, clones["broken"], "the pool stops cloning the template after quarantineThreshold failures")
	require.NotNil(t, e.h.GateSpawn(ctx, v2Model("broken"), "42"), "a spawn of the quarantined template is refused too")

	provision("good")
	assert.Equal(t, 1, clones["good"], "another template's pool is not slowed")
	assert.Nil(t, e.h.GateSpawn(ctx, v2Model("good"), "43"))

	q := e.h.custody.Quarantine.Quarantined()
	require.Len(t, q, 1)
	mu.Lock()
	now = q[0].Until // the back-off is over
	mu.Unlock()
	taken = true // the probe's slot was filled by another instance
	provision("broken")
	assert.Equal(t, 3, clones["broken"], "after the back-off one provisioning probes the template")
	assert.Len(t, e.h.custody.Quarantine.Quarantined(), 1, "a slot taken by another instance says nothing of the template: no lift")

	taken, fixed = false, true
	provision("broken")
	assert.Equal(t, 4, clones["broken"], "the next provisioning probes again")
	assert.Nil(t, e.h.GateSpawn(ctx, v2Model("broken"), "44"), "the probe's success lifts the quarantine")
}
