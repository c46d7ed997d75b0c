package metrics

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// TestSpawnFailureReasonOf: the reason of a failed spawn is its innermost
// mark (a claimed VM's power-on inside the VM's creation), else the code
// of a refusal at spawn time, else other; a mark leaves the text and the
// chain (errors.Is) of the error as they were.
func TestSpawnFailureReasonOf(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	powerOn := fmt.Errorf("prepare claimed vm: power on: %w", MarkSpawnFailure(SpawnFailurePowerOn, boom))
	cases := []struct {
		name string
		err  error
		want SpawnFailureReason
	}{
		{"nil", nil, SpawnFailureOther},
		{"unmarked", boom, SpawnFailureOther},
		{"marked", fmt.Errorf("spawn: %w", MarkSpawnFailure(SpawnFailureClone, boom)), SpawnFailureClone},
		{"innermost wins", fmt.Errorf("spawn: create vm: %w", MarkSpawnFailure(SpawnFailureClone, powerOn)), SpawnFailurePowerOn},
		{"refused: ip", fmt.Errorf("spawn: %w", refusal.Refuse(refusal.ReasonIP, "no address left")), SpawnFailureIP},
		{"refused: quarantined", refusal.Refuse(refusal.ReasonQuarantined, "template broken"), SpawnFailureQuarantined},
		{"refused: another code", refusal.Refuse(refusal.ReasonSpawning, "in flight"), SpawnFailureOther},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, SpawnFailureReasonOf(tc.err), tc.name)
	}
	assert.Nil(t, MarkSpawnFailure(SpawnFailureClone, nil))
	m := MarkSpawnFailure(SpawnFailureLaunch, fmt.Errorf("launch: %w", context.DeadlineExceeded))
	assert.Equal(t, "launch: context deadline exceeded", m.Error(), "the text is the error's")
	assert.ErrorIs(t, m, context.DeadlineExceeded)
}

// TestCapacityResourceOf: the refusal codes naming an exhausted resource
// map to capacity_refusals' resources, each resource from exactly one
// code; the others are not counted there.
func TestCapacityResourceOf(t *testing.T) {
	t.Parallel()
	got := map[CapacityResource]refusal.Reason{}
	for _, r := range refusal.Reasons {
		res, ok := CapacityResourceOf(r)
		if !ok {
			continue
		}
		_, dup := got[res]
		assert.False(t, dup, "%s from two codes", res)
		got[res] = r
	}
	assert.Equal(t, map[CapacityResource]refusal.Reason{
		CapacityCPU: refusal.ReasonCapacityCPU, CapacityMemory: refusal.ReasonCapacityMemory,
		CapacityIP: refusal.ReasonIP, CapacityCount: refusal.ReasonMaxWorkers,
		CapacityPlacement: refusal.ReasonPlacement,
	}, got)
	for _, res := range CapacityResources {
		_, ok := got[res]
		assert.True(t, ok, "%s is produced by a refusal code", res)
	}
}
