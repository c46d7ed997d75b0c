package cloudinit

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

func TestCloudInitNetwork(t *testing.T) {
	t.Parallel()
	nw, err := NetworkConfig(nil)
	require.NoError(t, err)
	assert.Nil(t, nw, "no IP plan: no network config, cloud-init uses DHCP")

	nw, err = NetworkConfig(&Address{IP: "10.1.2.3", SubnetMask: "255.255.252.0"})
	require.NoError(t, err)
	require.Len(t, nw.Ethernets, 1)
	eth := nw.Ethernets["nic0"]
	assert.Equal(t, 2, nw.Version)
	assert.Equal(t, []string{"10.1.2.3/22"}, eth.Addresses)
	assert.Empty(t, eth.Routes, "no gateway: no default route")
	assert.Nil(t, eth.Nameservers)

	for _, mask := range []string{"255.0.255.0", "not-a-mask", "ffff::"} {
		_, err := NetworkConfig(&Address{IP: "10.1.2.3", SubnetMask: mask})
		assert.Error(t, err, mask)
	}
}

// decodeOptions reads back the metadata and the raw userdata of the
// guestinfo options opts, as cloud-init does.
func decodeOptions(t *testing.T, opts []vctypes.Option) (Metadata, []byte) {
	t.Helper()
	v := Guestinfo(opts)
	md, err := DecodeGuestinfo(v[GuestinfoMetadata], v[GuestinfoMetadataEncoding])
	require.NoError(t, err)
	meta, err := ParseMetadata(md)
	require.NoError(t, err)
	ud, err := DecodeGuestinfo(v[GuestinfoUserdata], v[GuestinfoUserdataEncoding])
	require.NoError(t, err)
	return meta, ud
}

// TestCloudInitUserdataRoundTrip: a script with quotes, dollars and
// newlines comes back byte for byte from the encoded guestinfo.
func TestCloudInitUserdataRoundTrip(t *testing.T) {
	t.Parallel()
	script := "echo \"it's $HOME\"\n./worker --name='w 1' \\\n  --x=`date`"
	opts, err := Options("w-1-abc", "w-1", nil, Boot{Script: script, CDSConfig: "Q0RT"})
	require.NoError(t, err)
	meta, ud := decodeOptions(t, opts)
	assert.Equal(t, Metadata{InstanceID: "w-1-abc", LocalHostname: "w-1"}, meta)
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
	_, err = ParseMetadata([]byte(`{"instance-id":"i"}`))
	assert.Error(t, err, "no local-hostname")
}

// TestUserdataCloudInitSchema: the userdata of a worker, with a static
// address and a script full of shell quoting, is a cloud-config that
// cloud-init's own `cloud-init schema` accepts, and the metadata's network
// config carries the address, route and name servers.
func TestUserdataCloudInitSchema(t *testing.T) {
	t.Parallel()
	addr := &Address{IP: "192.168.88.10", Gateway: "192.168.88.1", SubnetMask: "255.255.255.0", DNS: []string{"192.168.88.2"}}
	script := "echo prestart\n./worker --name='w 1' \"$HOME\"\nshutdown -h now"
	opts, err := Options("w-1-abc", "w-1", addr, Boot{Script: script, CDSConfig: "Q0RT"})
	require.NoError(t, err)
	meta, ud := decodeOptions(t, opts)
	require.NotNil(t, meta.Network)
	eth := meta.Network.Ethernets["nic0"]
	assert.Equal(t, []string{"192.168.88.10/24"}, eth.Addresses)
	assert.Equal(t, []Route{{To: "0.0.0.0/0", Via: "192.168.88.1"}}, eth.Routes)
	require.NotNil(t, eth.Nameservers)
	assert.Equal(t, []string{"192.168.88.2"}, eth.Nameservers.Addresses)

	_, err = ParseCloudConfig(ud)
	require.NoError(t, err)
	testutil.CheckCloudConfig(t, ud)
}
