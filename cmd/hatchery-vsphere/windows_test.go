package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigNewShowsAWindowsModel: `config new` shows a Windows model
// example (os = "windows"); enabled, it passes `config check`, and an
// unknown os is refused with its key.
func TestConfigNewShowsAWindowsModel(t *testing.T) {
	t.Parallel()
	printed := runCmd(t, nil, nil, "config", "new").stdout
	entry := "  #[[hatchery.vsphere.guestCredentials]]\n    #modelVMWare = \"win2022\"\n    #username = \"Administrator\"\n    #password = \"\"\n    #os = \"windows\"\n"
	require.Contains(t, printed, entry, "config new shows a Windows model example")
	enabled := strings.Replace(printed, entry, strings.ReplaceAll(entry, "#", ""), 1)
	r := runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, enabled))
	assert.Equal(t, exitOK, r.code, r.stderr)

	bad := strings.Replace(enabled, "\n    os = \"windows\"\n", "\n    os = \"win\"\n", 1)
	require.NotEqual(t, enabled, bad)
	r = runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, bad))
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, `hatchery.vsphere.guestCredentials[0].os: "win" is not an os`)
}
