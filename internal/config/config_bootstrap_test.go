package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

func problems(t *testing.T, c Config) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := c.Validate()
	if err == nil {
		return out
	}
	var ce Errors
	require.True(t, errors.As(err, &ce), "%v", err)
	for _, e := range ce {
		out[e.Key] = e.Problem
	}
	return out
}

func TestValidateBootstrap(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.DefaultBootstrap = "ssh"
	c.FinishedWorkerGracePeriod = -1
	c.Models = []GuestCredential{{ModelVMWare: "ubuntu", Bootstrap: "pxe"}}
	p := problems(t, c)
	assert.Contains(t, p, KeyPrefix+".defaultBootstrap")
	assert.Contains(t, p, KeyPrefix+".finishedWorkerGracePeriod")
	assert.Contains(t, p, KeyPrefix+".models[0].bootstrap")

	// A cloud-init default makes entries without a username valid; a
	// guestops entry still needs one.
	c = validConfig()
	c.DefaultBootstrap = BootstrapCloudInit
	c.GuestCredentials = []GuestCredential{
		{ModelVMWare: "debian12"},
		{ModelVMWare: "ubuntu", Bootstrap: BootstrapGuestOps},
	}
	p = problems(t, c)
	assert.NotContains(t, p, KeyPrefix+".guestCredentials[0].username")
	assert.Contains(t, p, KeyPrefix+".guestCredentials[1].username")
}

func TestBootstrapOf(t *testing.T) {
	t.Parallel()
	v2 := func(image string) sdk.WorkerStarterWorkerModel {
		return sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "m"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: image}}
	}
	c := validConfig()
	c.GuestCredentials = []GuestCredential{{ModelVMWare: "debian12", Username: "u", Bootstrap: BootstrapCloudInit}}
	c.Models = []GuestCredential{{ModelVMWare: "ubuntu", Username: "u"}}
	assert.Equal(t, BootstrapCloudInit, c.BootstrapOf(v2("debian12")))
	assert.Equal(t, BootstrapGuestOps, c.BootstrapOf(v2("ubuntu")), "entry without bootstrap: the default")
	assert.Equal(t, BootstrapGuestOps, c.BootstrapOf(v2("rocky")), "no entry: the default")
	c.DefaultBootstrap = BootstrapCloudInit
	assert.Equal(t, BootstrapCloudInit, c.BootstrapOf(v2("ubuntu")))
	assert.Equal(t, BootstrapCloudInit, c.BootstrapOf(v2("rocky")))
}
