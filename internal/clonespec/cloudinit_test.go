package clonespec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
)

// TestCloudInitOptions: a warm-pool claim's cloud-init guestinfo (the
// options the claim's reconfigure sets) names the new worker as the
// guest's hostname and carries the userdata; an address in no configured
// range is refused. (Moved from the retired VMPort's test: the pool now
// asks the builder itself.)
func TestCloudInitOptions(t *testing.T) {
	t.Parallel()
	e := newSpecEnv(t, specConfig())
	opts, err := e.b.CloudInitOptions("worker-1", "10.0.0.12", cloudinit.Boot{Script: "run"})
	require.NoError(t, err)
	gi := cloudinit.Guestinfo(opts)
	assert.NotEmpty(t, gi[cloudinit.GuestinfoUserdata])
	raw, err := cloudinit.DecodeGuestinfo(gi[cloudinit.GuestinfoMetadata], gi[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	md, err := cloudinit.ParseMetadata(raw)
	require.NoError(t, err)
	assert.Equal(t, "worker-1", md.LocalHostname, "the new name's hostname")

	_, err = e.b.CloudInitOptions("w", "192.168.9.9", cloudinit.Boot{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is in no configured range")
}
