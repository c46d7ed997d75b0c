package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolScalingKeys: a demand entry loads from TOML with its schedules
// and reads its defaults from Default's constants.
func TestPoolScalingKeys(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.WorkerProvisioning = []WorkerProvisioning{
		{ModelVMWare: "debian12", Number: 2},
		{ModelVMWare: "debian12", Flavor: "small", Min: 1, Max: 8, TimeZone: "Europe/Paris",
			Schedules: []PoolSchedule{{Days: []string{"mon", "FRI"}, From: "08:00", To: "19:30", Min: 2, Max: 6}, {From: "22:00", To: "06:00", Max: 1}}},
	}
	require.NoError(t, c.Validate())
	fixed, demand := c.WorkerProvisioning[0], c.WorkerProvisioning[1]
	assert.False(t, fixed.Scales())
	assert.True(t, demand.Scales())
	assert.Equal(t, DefaultPoolWarmShare, demand.PoolWarmShare())
	assert.Equal(t, DefaultPoolIdleMinutes*time.Minute, demand.PoolIdle())
	assert.Zero(t, demand.PoolAhead())
	assert.Equal(t, "Europe/Paris", demand.PoolLocation().String())
	assert.Equal(t, "UTC", fixed.PoolLocation().String())
	assert.Equal(t, []time.Weekday{time.Monday, time.Friday}, demand.Schedules[0].Weekdays())
	from, to := demand.Schedules[0].Span()
	assert.Equal(t, 8*time.Hour, from)
	assert.Equal(t, 19*time.Hour+30*time.Minute, to)

	doc := `
[hatchery.vsphere]
  [[hatchery.vsphere.workerProvisioning]]
    modelVMWare = "debian12"
    max = 10
    warmShare = 0.95
    idleMinutes = 45
    [[hatchery.vsphere.workerProvisioning.schedules]]
      days = ["sat", "sun"]
      from = "00:00"
      to = "24:00"
      max = 1
`
	got, err := loadString(t, doc, noEnv())
	if err != nil {
		// Only the keys this test does not set may be refused.
		require.NotContains(t, err.Error(), "workerProvisioning")
	}
	require.NotNil(t, got)
	require.Len(t, got.WorkerProvisioning, 1)
	w := got.WorkerProvisioning[0]
	assert.Equal(t, 10, w.Max)
	assert.Equal(t, 0.95, w.PoolWarmShare())
	assert.Equal(t, 45*time.Minute, w.PoolIdle())
	require.Len(t, w.Schedules, 1)
	assert.Equal(t, []string{"sat", "sun"}, w.Schedules[0].Days)
	assert.Equal(t, 1, w.Schedules[0].Max)
}

// TestPoolScalingValidation: every problem of a demand entry is named by
// its TOML key path, all of them in one Validate.
func TestPoolScalingValidation(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.WorkerProvisioning = []WorkerProvisioning{
		{ModelVMWare: "debian12", Number: 2, Max: 4},
		{ModelVMWare: "debian12", Flavor: "small", Min: 3, WarmShare: 1.2, IdleMinutes: -1, AheadMinutes: 5000, TimeZone: "Mars/Olympus",
			Schedules: []PoolSchedule{{Days: []string{"monday"}, From: "8h", To: "25:00", Min: -1, Max: -2}, {From: "10:00", To: "10:00", Min: 9, Max: 4}}},
		{ModelVMWare: "debian12", Flavor: "large", Min: 5, Max: 2},
	}
	err := c.Validate()
	require.Error(t, err)
	var ce Errors
	require.True(t, errors.As(err, &ce))
	want := map[string]string{
		"workerProvisioning[0].number":               "not both",
		"workerProvisioning[1].max":                  "required, > 0",
		"workerProvisioning[1].warmShare":            "from 0.5 to 0.999",
		"workerProvisioning[1].idleMinutes":          "from 0",
		"workerProvisioning[1].aheadMinutes":         "5000",
		"workerProvisioning[1].timeZone":             `"Mars/Olympus"`,
		"workerProvisioning[1].schedules[0].days[0]": `"monday"`,
		"workerProvisioning[1].schedules[0].from":    `"8h"`,
		"workerProvisioning[1].schedules[0].to":      `"25:00"`,
		"workerProvisioning[1].schedules[0].min":     "must be >= 0",
		"workerProvisioning[1].schedules[0].max":     "must be >= 0",
		"workerProvisioning[1].schedules[1].to":      "equals from",
		"workerProvisioning[1].schedules[1].min":     "greater than the period's max 4",
		"workerProvisioning[2].min":                  "greater than max 2",
	}
	for key, problem := range want {
		found := false
		for _, fe := range ce {
			if fe.Key == KeyPrefix+"."+key && strings.Contains(fe.Problem, problem) {
				found = true
			}
		}
		assert.True(t, found, "want %s: …%s…; got:\n%v", key, problem, err)
	}
}
