package vsphere

import (
	"encoding/base64"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCloudInitNetwork(t *testing.T) {
	t.Parallel()
	nw, err := cloudInitNetwork(nil)
	require.NoError(t, err)
	assert.Nil(t, nw, "no IP plan: no network config, cloud-init uses DHCP")

	nw, err = cloudInitNetwork(&ippool.Lease{IP: "10.1.2.3", SubnetMask: "255.255.252.0"})
	require.NoError(t, err)
	require.Len(t, nw.Ethernets, 1)
	eth := nw.Ethernets["nic0"]
	assert.Equal(t, 2, nw.Version)
	assert.Equal(t, []string{"10.1.2.3/22"}, eth.Addresses)
	assert.Empty(t, eth.Routes, "no gateway: no default route")
	assert.Nil(t, eth.Nameservers)

	for _, mask := range []string{"255.0.255.0", "not-a-mask", "ffff::"} {
		_, err := cloudInitNetwork(&ippool.Lease{IP: "10.1.2.3", SubnetMask: mask})
		assert.Error(t, err, mask)
	}
}

// TestCloudInitUserdataRoundTrip: a script with quotes, dollars and
// newlines comes back byte for byte from the encoded guestinfo.
func TestCloudInitUserdataRoundTrip(t *testing.T) {
	t.Parallel()
	script := "echo \"it's $HOME\"\n./worker --name='w 1' \\\n  --x=`date`"
	opts, err := cloudInitOptions("w-1-abc", "w-1", nil, cloudInitBoot{script: script, cdsConfig: "Q0RT"})
	require.NoError(t, err)
	v := optionValues(opts)
	md, err := DecodeGuestinfo(v[GuestinfoMetadata], v[GuestinfoMetadataEncoding])
	require.NoError(t, err)
	meta, err := ParseCloudInitMetadata(md)
	require.NoError(t, err)
	assert.Equal(t, CloudInitMetadata{InstanceID: "w-1-abc", LocalHostname: "w-1"}, meta)
	ud, err := DecodeGuestinfo(v[GuestinfoUserdata], v[GuestinfoUserdataEncoding])
	require.NoError(t, err)
	cc, err := ParseCloudConfig(ud)
	require.NoError(t, err)
	require.Len(t, cc.WriteFiles, 2)
	assert.Equal(t, "Q0RT", cc.WriteFiles[0].Content)
	assert.Contains(t, cc.WriteFiles[1].Content, "\n"+script+"\n")
}

func TestDecodeGuestinfo(t *testing.T) {
	t.Parallel()
	b, err := DecodeGuestinfo("plain", "")
	require.NoError(t, err)
	assert.Equal(t, "plain", string(b))
	b, err = DecodeGuestinfo(base64.StdEncoding.EncodeToString([]byte("x")), "b64")
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
	b, err = DecodeGuestinfo(gzipBase64([]byte("y")), "gz+b64")
	require.NoError(t, err)
	assert.Equal(t, "y", string(b))
	_, err = DecodeGuestinfo("x", "rot13")
	assert.Error(t, err)
	_, err = DecodeGuestinfo("!!", "gzip+base64")
	assert.Error(t, err)
	_, err = ParseCloudConfig([]byte(`{"runcmd":[]}`))
	assert.Error(t, err, "no #cloud-config header")
	_, err = ParseCloudInitMetadata([]byte(`{"instance-id":"i"}`))
	assert.Error(t, err, "no local-hostname")
}
