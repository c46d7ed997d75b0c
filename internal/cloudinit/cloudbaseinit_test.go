package cloudinit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWindowsOptions: a Windows boot's guestinfo is cloudbase-init's:
// gzip+base64 metadata with instance id and hostname and no network, a
// #ps1_sysnative userdata setting the static address (none with DHCP),
// then CDS_CONFIG, then the script.
func TestWindowsOptions(t *testing.T) {
	t.Parallel()
	b := Boot{Script: "& .\\worker.exe\n", CDSConfig: "Q0RTX0NPTkZJRw==", Windows: true}
	addr := &Address{IP: "10.1.2.3", Gateway: "10.1.2.1", SubnetMask: "255.255.254.0", DNS: []string{"10.1.2.53", "10.1.2.54"}}
	opts, err := Options("w-1-abc", "w-1", addr, b)
	require.NoError(t, err)
	g := Guestinfo(opts)
	md, err := DecodeGuestinfo(g[GuestinfoMetadata], g[GuestinfoMetadataEncoding])
	require.NoError(t, err)
	meta, err := ParseMetadata(md)
	require.NoError(t, err)
	assert.Equal(t, Metadata{InstanceID: "w-1-abc", LocalHostname: "w-1"}, meta)
	ud, err := DecodeGuestinfo(g[GuestinfoUserdata], g[GuestinfoUserdataEncoding])
	require.NoError(t, err)
	s := string(ud)
	assert.True(t, strings.HasPrefix(s, "#ps1_sysnative\n"))
	assert.Contains(t, s, "-IPAddress '10.1.2.3' -PrefixLength 23 -DefaultGateway '10.1.2.1' | Out-Null\n")
	assert.Contains(t, s, "-ServerAddresses @('10.1.2.53', '10.1.2.54')\n")
	assert.True(t, strings.HasSuffix(s, "$env:CDS_CONFIG = 'Q0RTX0NPTkZJRw=='\n& .\\worker.exe\n"), s)

	opts, err = Options("w-2-abc", "w-2", nil, b)
	require.NoError(t, err)
	ud, err = DecodeGuestinfo(Guestinfo(opts)[GuestinfoUserdata], GuestinfoEncodingGzipBase64)
	require.NoError(t, err)
	assert.NotContains(t, string(ud), "New-NetIPAddress", "DHCP: the address is left alone")

	_, err = Options("w-3", "w-3", &Address{IP: "10.1.2.3", SubnetMask: "255.0.255.0"}, b)
	assert.ErrorContains(t, err, "not a contiguous mask")
}

// TestPSQuote: a value with a quote stays one PowerShell string.
func TestPSQuote(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "'it''s'", psQuote("it's"))
}
