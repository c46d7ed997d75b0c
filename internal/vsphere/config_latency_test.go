package vsphere

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateSlowStartThreshold(t *testing.T) {
	t.Parallel()
	c := DefaultConfiguration()
	c.SlowStartThreshold = -1
	var es ConfigErrors
	c.validateLatency(&es)
	assert.Contains(t, es.Error(), "slowStartThreshold")
	assert.Equal(t, 300, DefaultConfiguration().SlowStartThreshold)
}
