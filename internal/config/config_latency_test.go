package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateSlowStartThreshold(t *testing.T) {
	t.Parallel()
	c := Default()
	c.SlowStartThreshold = -1
	var es Errors
	c.validateLatency(&es)
	assert.Contains(t, es.Error(), "slowStartThreshold")
	assert.Equal(t, 300, Default().SlowStartThreshold)
}
