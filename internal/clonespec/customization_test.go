package clonespec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// The customization in the project's terms; the adapter's specification
// of it (LinuxPrep, sysprep, the adapter mappings) is tested in
// internal/vcenter (TestCustomizationSpecOf).

// TestCustomizationDHCPEveryCard: without a lease every card of the
// template gets DHCP and the identity is Linux's with the name's
// hostname.
func TestCustomizationDHCPEveryCard(t *testing.T) {
	t.Parallel()
	c, err := Customization("Worker_1.job", 2, nil, false)
	require.NoError(t, err)
	assert.False(t, c.Windows)
	assert.Equal(t, "worker-1-job", c.Name)
	assert.Equal(t, make([]vctypes.NICAddress, 2), c.NICs, "one address per card, DHCP: vSphere refuses a mismatch")
}

// TestCustomizationFixedAddressFirstCard: a lease is the first card's
// fixed address with its mask, gateway and DNS; the second card stays
// DHCP.
func TestCustomizationFixedAddressFirstCard(t *testing.T) {
	t.Parallel()
	lease := &ippool.Lease{IP: "10.0.0.12", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0", DNS: []string{"10.0.0.2"}}
	c, err := Customization("w", 2, lease, false)
	require.NoError(t, err)
	assert.Equal(t, vctypes.NICAddress{IP: "10.0.0.12", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0", DNS: []string{"10.0.0.2"}}, c.NICs[0])
	assert.Equal(t, vctypes.NICAddress{}, c.NICs[1], "DHCP")

	noGateway := *lease
	noGateway.Gateway = ""
	c, err = Customization("w", 1, &noGateway, false)
	require.NoError(t, err)
	assert.Empty(t, c.NICs[0].Gateway, "no gateway configured: none set")
}

// TestCustomizationWindowsSysprep: a Windows VM is customized by sysprep
// with its computer name (15 characters at most), with the same network
// settings; the request holds no password.
func TestCustomizationWindowsSysprep(t *testing.T) {
	t.Parallel()
	lease := &ippool.Lease{IP: "10.0.0.13", SubnetMask: "255.255.255.0"}
	c, err := Customization("win2022-worker-job-1234", 1, lease, true)
	require.NoError(t, err)
	assert.True(t, c.Windows)
	assert.Equal(t, WindowsComputerName("win2022-worker-job-1234"), c.Name)
	assert.LessOrEqual(t, len(c.Name), 15)
	assert.Equal(t, "10.0.0.13", c.NICs[0].IP)
}

// TestCustomizationRefusesNoHostnameOrNoCard: a name without a letter
// or digit gives no hostname, a template without a card nothing to
// customize: both are errors naming the VM.
func TestCustomizationRefusesNoHostnameOrNoCard(t *testing.T) {
	t.Parallel()
	_, err := Customization("___", 1, nil, false)
	assert.ErrorContains(t, err, `worker name "___" gives no valid hostname`)
	_, err = Customization("w", 0, nil, false)
	assert.ErrorContains(t, err, `vm "w": no network card`)
}
