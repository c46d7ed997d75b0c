package clonespec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
)

// TestCustomizationDHCPEveryCard: without a lease every card of the
// template gets DHCP and the identity is LinuxPrep with the name's
// hostname; no DNS is set.
func TestCustomizationDHCPEveryCard(t *testing.T) {
	t.Parallel()
	c, err := Customization("Worker_1.job", 2, nil, false)
	require.NoError(t, err)
	prep, ok := c.Identity.(*types.CustomizationLinuxPrep)
	require.True(t, ok, "%T", c.Identity)
	assert.Equal(t, "worker-1-job", prep.HostName.(*types.CustomizationFixedName).Name)
	require.Len(t, c.NicSettingMap, 2, "one mapping per card: vSphere refuses a mismatch")
	for i, m := range c.NicSettingMap {
		assert.IsType(t, &types.CustomizationDhcpIpGenerator{}, m.Adapter.Ip, "card %d", i)
	}
	assert.Empty(t, c.GlobalIPSettings.DnsServerList)
	assert.Nil(t, c.Options)
}

// TestCustomizationFixedAddressFirstCard: a lease is the first card's
// fixed address with its mask, gateway and DNS (the DNS global too);
// the second card stays DHCP.
func TestCustomizationFixedAddressFirstCard(t *testing.T) {
	t.Parallel()
	lease := &ippool.Lease{IP: "10.0.0.12", Gateway: "10.0.0.1", SubnetMask: "255.255.255.0", DNS: []string{"10.0.0.2"}}
	c, err := Customization("w", 2, lease, false)
	require.NoError(t, err)
	first := c.NicSettingMap[0].Adapter
	assert.Equal(t, &types.CustomizationFixedIp{IpAddress: "10.0.0.12"}, first.Ip)
	assert.Equal(t, "255.255.255.0", first.SubnetMask)
	assert.Equal(t, []string{"10.0.0.1"}, first.Gateway)
	assert.Equal(t, []string{"10.0.0.2"}, first.DnsServerList)
	assert.Equal(t, []string{"10.0.0.2"}, c.GlobalIPSettings.DnsServerList)
	assert.IsType(t, &types.CustomizationDhcpIpGenerator{}, c.NicSettingMap[1].Adapter.Ip)

	noGateway := *lease
	noGateway.Gateway = ""
	c, err = Customization("w", 1, &noGateway, false)
	require.NoError(t, err)
	assert.Empty(t, c.NicSettingMap[0].Adapter.Gateway, "no gateway configured: none set")
}

// TestCustomizationWindowsSysprep: a Windows VM is customized by sysprep
// with its computer name (15 characters at most), a new SID and a
// reboot, with the same network settings; no password in the spec.
func TestCustomizationWindowsSysprep(t *testing.T) {
	t.Parallel()
	lease := &ippool.Lease{IP: "10.0.0.13", SubnetMask: "255.255.255.0"}
	c, err := Customization("win2022-worker-job-1234", 1, lease, true)
	require.NoError(t, err)
	sp, ok := c.Identity.(*types.CustomizationSysprep)
	require.True(t, ok, "%T", c.Identity)
	assert.Equal(t, WindowsComputerName("win2022-worker-job-1234"), sp.UserData.ComputerName.(*types.CustomizationFixedName).Name)
	assert.Nil(t, sp.GuiUnattended.Password)
	opts, ok := c.Options.(*types.CustomizationWinOptions)
	require.True(t, ok)
	assert.True(t, opts.ChangeSID)
	assert.Equal(t, &types.CustomizationFixedIp{IpAddress: "10.0.0.13"}, c.NicSettingMap[0].Adapter.Ip)
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
