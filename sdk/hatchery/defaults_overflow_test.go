package hatchery

import (
	"math"
	"testing"
	"time"
)

// TestDurationsNeverOverflow: a huge count of seconds once wrapped to a
// negative duration.
func TestDurationsNeverOverflow(t *testing.T) {
	for _, n := range []int{math.MaxInt64, math.MaxInt64 / 1000, math.MinInt64} {
		var c CommonConfiguration
		c.API.RequestTimeout, c.Provision.RegisterFrequency = n, n
		for name, d := range map[string]time.Duration{"requestTimeout": c.RequestTimeoutDuration(), "registerFrequency": c.RegisterFrequencyDuration()} {
			if d <= 0 || d > maxSeconds*time.Second {
				t.Errorf("%s = %d converts to %v", name, n, d)
			}
		}
	}
}
