package refusal

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRepeatsFirstPerJobAndReason: a refusal is first once per job and
// reason, whatever its counts; Forget and Prune make it first again.
func TestRepeatsFirstPerJobAndReason(t *testing.T) {
	t.Parallel()
	var r Repeats
	assert.True(t, r.First("v1:1", "max workers reached (10/10)"))
	assert.False(t, r.First("v1:1", "max workers reached (9/10)"), "the counts vary, the reason is the same")
	assert.True(t, r.First("v1:1", "region"), "another reason")
	assert.True(t, r.First("v1:2", "max workers reached (10/10)"), "another job")

	r.Forget("v1:1")
	assert.True(t, r.First("v1:1", "max workers reached (10/10)"))

	r.Prune("v1:", func(k string) bool { return k == "v1:2" })
	assert.True(t, r.First("v1:1", "region"), "pruned")
	assert.False(t, r.First("v1:2", "max workers reached"), "kept")
}
