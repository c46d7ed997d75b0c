package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigCheckCloudInitNeedsNoGuestCredentials: a guestCredentials entry
// without a username is refused for a guest-operations model and accepted
// for a cloud-init one, for which `config check` says that no guest
// credentials are needed.
func TestConfigCheckCloudInitNeedsNoGuestCredentials(t *testing.T) {
	t.Parallel()
	// The guestCredentials entry of `config new` is an example: an
	// operator enables it by deleting the "#" of its lines.
	printed := runCmd(t, nil, nil, "config", "new").stdout
	entry := "  #[[hatchery.vsphere.guestCredentials]]\n    #modelPath = \"\"\n    #modelVMWare = \"debian12\"\n    #username = \"cds\"\n    #password = \"\"\n    #preStartScript = \"\"\n    #bootstrap = \"\"\n"
	require.Contains(t, printed, entry, "config new shows a guestCredentials example")
	printed = strings.Replace(printed, entry, strings.ReplaceAll(entry, "#", ""), 1)
	noUser := strings.Replace(printed, "\n    username = \"cds\"\n", "\n    username = \"\"\n", 1)
	require.NotEqual(t, printed, noUser, "the enabled example has a username")

	r := runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, noUser))
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, "hatchery.vsphere.guestCredentials[0].username: required")

	cloudInit := strings.Replace(noUser, "\n    bootstrap = \"\"\n", "\n    bootstrap = \"cloud-init\"\n", 1)
	require.NotEqual(t, noUser, cloudInit)
	r = runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, cloudInit))
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, "configuration OK\n"+
		"  hatchery.vsphere.guestCredentials[0] (model \"debian12\"): bootstrap cloud-init: no guest credentials needed\n", r.stdout)

	bad := strings.Replace(printed, "\n    bootstrap = \"\"\n", "\n    bootstrap = \"ssh\"\n", 1)
	r = runCmd(t, secretsEnv(), nil, "config", "check", "--config", writeFile(t, bad))
	assert.Equal(t, exitFail, r.code)
	assert.Contains(t, r.stderr, `hatchery.vsphere.guestCredentials[0].bootstrap: "ssh" is not a bootstrap mode`)
}
