package warmpool

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/stretchr/testify/assert"
)

// provisionNameRE is a pool slot name (Key.SlotName).
var provisionNameRE = regexp.MustCompile(`^warmpool-v[12]-[a-z0-9-]+-[0-9a-f]{6}-[0-9]+$`)

// TestRoundRobinTasks interleaves the queues.
func TestRoundRobinTasks(t *testing.T) {
	t.Parallel()
	a, b, c := Task{Template: modelref.Template{Name: "a"}}, Task{Template: modelref.Template{Name: "b"}}, Task{Template: modelref.Template{Name: "c"}}
	got := roundRobinTasks([][]Task{{a, a, a}, {b}, {c, c}})
	var s string
	for _, x := range got {
		s += x.Template.Name
	}
	assert.Equal(t, "abcaca", s)
}

// TestPoolSlotNames: slot names are deterministic, lower-case and
// DNS-safe, within vSphere's 80 characters, keep today's prefixes and keep
// pools apart (even pools whose model and flavor sanitize alike).
func TestPoolSlotNames(t *testing.T) {
	t.Parallel()
	deb := Key{Model: "debian12"}
	assert.Equal(t, deb.SlotName(3), deb.SlotName(3), "deterministic")
	assert.NotEqual(t, deb.SlotName(0), deb.SlotName(1))
	keys := []Key{
		deb,
		{Model: "debian12", Flavor: "large"},
		{Model: "Debian12"}, // sanitizes like debian12: the hash keeps them apart
		{V1: true, Model: "grp/m1"},
		{Model: "debian12-large"},
		{Model: strings.Repeat("very-long-template-name-", 10), Flavor: strings.Repeat("x", 90)},
	}
	seen := map[string]bool{}
	for _, k := range keys {
		for _, slot := range []int{0, 7, 99999} {
			n := k.SlotName(slot)
			assert.Regexp(t, provisionNameRE, n)
			assert.LessOrEqual(t, len(n), maxVMNameLen, n)
			assert.True(t, strings.HasPrefix(n, k.prefix()), n)
			assert.False(t, seen[n], "%s names two slots", n)
			seen[n] = true
		}
	}
	assert.True(t, strings.HasPrefix(deb.SlotName(2), "warmpool-v2-debian12-"), deb.SlotName(2))
	assert.True(t, strings.HasSuffix(deb.SlotName(2), "-2"), deb.SlotName(2))
}
