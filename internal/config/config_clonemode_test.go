package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// TestValidateCloneMode: cloneMode takes "", linked or instant; instant is
// refused, with the key path and the reason, for a model started through
// guest operations (its own entry's or defaultBootstrap) and for a
// Windows model: their identity comes from a customization at boot.
func TestValidateCloneMode(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.GuestCredentials = []GuestCredential{
		{ModelVMWare: "debian12", Bootstrap: BootstrapCloudInit, CloneMode: CloneModeInstant},
		{ModelVMWare: "rocky", Username: "u", CloneMode: "fast"},
		{ModelVMWare: "alma", Username: "u", CloneMode: CloneModeInstant},
		{ModelVMWare: "win2022", Bootstrap: BootstrapCloudInit, OS: OSWindows, CloneMode: CloneModeInstant},
		{ModelVMWare: "ubuntu", Username: "u", CloneMode: CloneModeLinked},
	}
	c.Models = []GuestCredential{{ModelPath: "g/m", Username: "u", CloneMode: CloneModeInstant}}
	p := problems(t, c)
	assert.NotContains(t, p, KeyPrefix+".guestCredentials[0].cloneMode", "a linux cloud-init model may be instant")
	assert.Contains(t, p[KeyPrefix+".guestCredentials[1].cloneMode"], `"fast" is not a clone mode`)
	assert.Contains(t, p[KeyPrefix+".guestCredentials[2].cloneMode"], "never boots")
	assert.Contains(t, p[KeyPrefix+".guestCredentials[2].cloneMode"], `"guestops"`)
	assert.Contains(t, p[KeyPrefix+".guestCredentials[3].cloneMode"], "windows")
	assert.NotContains(t, p, KeyPrefix+".guestCredentials[4].cloneMode")
	assert.Contains(t, p[KeyPrefix+".models[0].cloneMode"], "never boots")

	// defaultBootstrap = cloud-init makes an entry without its own
	// bootstrap acceptable.
	ok := validConfig()
	ok.DefaultBootstrap = BootstrapCloudInit
	ok.Models = []GuestCredential{{ModelPath: "g/m", CloneMode: CloneModeInstant}}
	require.NoError(t, ok.Validate())
	var keys []string
	for k := range ok.InstantEntries() {
		keys = append(keys, k)
	}
	assert.Equal(t, []string{"models[0]"}, keys)
	v1 := sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "m", Group: &sdk.Group{Name: "g"}}}
	assert.Equal(t, CloneModeInstant, ok.CloneModeOf(v1))
}

// TestCloneModeIsLive: cloneMode is a field of a model entry, a live key:
// a reload switching a model to instant (or back) is applied without a
// restart; the instant-parents loop reads the running configuration at
// each pass (docs/reload.md, docs/instant-clones.md).
func TestCloneModeIsLive(t *testing.T) {
	t.Parallel()
	old := validConfig()
	old.DefaultBootstrap = BootstrapCloudInit
	old.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12"}}
	cur := validConfig()
	cur.DefaultBootstrap = BootstrapCloudInit
	cur.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12", CloneMode: CloneModeInstant}}
	changed := ChangedKeys(&old, &cur)
	require.Equal(t, []string{KeyPrefix + ".guestCredentials[0].cloneMode"}, changed)
	assert.True(t, LiveKey(changed[0]))
}
