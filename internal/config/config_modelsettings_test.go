package config

import (
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/stretchr/testify/require"
)

// TestSettingsOfAgreesWithTheLookups: SettingsOf is BootstrapOf, OSOf and
// CloneModeOf in one lookup, for a model with an entry (guestCredentials
// before models) and one without; an entry is matched on the model's key
// only (a V1 model by its path, never by its base image).
func TestSettingsOfAgreesWithTheLookups(t *testing.T) {
	t.Parallel()
	c := &Config{
		DefaultBootstrap: BootstrapCloudInit,
		GuestCredentials: []GuestCredential{{ModelVMWare: "win2022", OS: OSWindows, Bootstrap: BootstrapGuestOps, Username: "admin"}},
		Models:           []GuestCredential{{ModelVMWare: "win2022", OS: OSLinux}, {ModelPath: "grp/mymodel", CloneMode: CloneModeLinked}},
	}
	v2 := func(image string) sdk.WorkerStarterWorkerModel {
		return sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "m"}, VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: image}}
	}
	v1 := sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "mymodel", Group: &sdk.Group{Name: "grp"}, ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "win2022"}}}
	for _, m := range []sdk.WorkerStarterWorkerModel{v2("win2022"), v2("debian12"), v1} {
		s := c.SettingsOf(m)
		require.Equal(t, c.BootstrapOf(m), s.Bootstrap, m.GetName())
		require.Equal(t, c.OSOf(m), s.OS, m.GetName())
		require.Equal(t, c.CloneModeOf(m), s.CloneMode, m.GetName())
		if e := c.ModelEntry(m); e != nil {
			require.Equal(t, *e, *s.Entry)
		} else {
			require.Nil(t, s.Entry)
		}
	}
	require.Equal(t, "admin", c.SettingsOf(v2("win2022")).Entry.Username, "guestCredentials before models")
	require.Equal(t, OSLinux, c.SettingsOf(v1).OS, "the V1 model is not matched on its base image")
	require.Equal(t, CloneModeLinked, c.SettingsOf(v1).CloneMode)
}
