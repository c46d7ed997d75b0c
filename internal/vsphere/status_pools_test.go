package vsphere

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cds-contrib/hatchery-vsphere/internal/poolsize"
	"github.com/cds-contrib/hatchery-vsphere/internal/warmpool"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestPoolStatusLines: one /mon/status line per warm pool with its
// target, the reason and the hit ratio.
func TestPoolStatusLines(t *testing.T) {
	t.Parallel()
	lines := poolStatusLines([]warmpool.PoolStatus{
		{Key: warmpool.Key{Model: "debian12"}, Target: 2, Reason: poolsize.ReasonFixed, Detail: "number 2"},
		{Key: warmpool.Key{Model: "debian12", Flavor: "small"}, Demand: true, Target: 6, Reason: poolsize.ReasonAhead,
			Detail: "4.2 jobs expected within 4m0s from 25m0s", HitRatio: 0.925, Starts: 120},
		{Key: warmpool.Key{V1: true, Model: "shared.infra/debian12"}, Demand: true, Target: 0, Reason: poolsize.ReasonMin, Detail: "no pass yet"},
	})
	assert.Equal(t, []sdk.MonitoringStatusLine{
		{Component: "vsphere/warm-pool/debian12", Value: "target 2 (fixed: number 2), no start yet", Status: sdk.MonitoringStatusOK},
		{Component: "vsphere/warm-pool/debian12/small", Value: "target 6 (ahead: 4.2 jobs expected within 4m0s from 25m0s), warm starts 92% of 120", Status: sdk.MonitoringStatusOK},
		{Component: "vsphere/warm-pool/v1/shared.infra/debian12", Value: "target 0 (min: no pass yet), no start yet", Status: sdk.MonitoringStatusOK},
	}, lines)
}
