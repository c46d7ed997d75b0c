package clonespec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWindowsComputerName: a name that fits Windows's 15 characters is the
// computer name as it is (its hostname form); a longer one keeps a prefix
// and a hash of the whole name, so names sharing their first characters
// give different computer names.
func TestWindowsComputerName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "worker-win-1", WindowsComputerName("worker-win-1"))
	assert.Equal(t, "w-15-chars-abcd", WindowsComputerName("W_15.chars-abcd"))
	a := WindowsComputerName("win2022-worker-job-1234")
	b := WindowsComputerName("win2022-worker-job-1235")
	for _, n := range []string{a, b} {
		assert.LessOrEqual(t, len(n), 15, n)
		assert.True(t, strings.HasPrefix(n, "win2022-wo-"), n)
		assert.Equal(t, SanitizeHostname(n), n, "a valid hostname")
	}
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, WindowsComputerName("win2022-worker-job-1234"), "stable")
	assert.Equal(t, "abcdefgh-", WindowsComputerName("abcdefgh--xxxxxxxxxxxxxx")[:9], "no trailing dash doubled")
}
