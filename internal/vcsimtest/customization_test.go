package vcsimtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// customizedClone clones the default template as name, powered on, with
// a LinuxPrep customization giving its only card ip.
func customizedClone(ctx context.Context, t *testing.T, env *vcsimtest.Env, name string, ip types.BaseCustomizationIpGenerator) {
	t.Helper()
	tpl, folder, pool := cloneFixture(ctx, t, env)
	devices, err := tpl.Device(ctx)
	require.NoError(t, err)
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	require.Len(t, cards, 1, "the default template has one card")
	spec := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &pool},
		PowerOn:  true,
		Customization: &types.CustomizationSpec{
			Identity:      &types.CustomizationLinuxPrep{HostName: &types.CustomizationFixedName{Name: name}},
			NicSettingMap: []types.CustomizationAdapterMapping{{Adapter: types.CustomizationIPSettings{Ip: ip}}},
		},
	}
	task, err := tpl.Clone(ctx, folder, name, spec)
	require.NoError(t, err)
	_, err = task.WaitForResult(ctx)
	require.NoError(t, err)
}

// TestCustomizedCloneReportsItsAddress: a clone customized with DHCP
// reports a lease once its guest is ready (the simulator alone gives it
// none: customization.go), one with a fixed address that address (the
// simulator's own), and without a DHCP server on the network
// (Env.SetDHCP(false)) the DHCP clone's guest is ready but has no
// address.
func TestCustomizedCloneReportsItsAddress(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	customizedClone(ctx, t, env, "dhcp", &types.CustomizationDhcpIpGenerator{})
	st := env.MustInspect("dhcp")
	require.True(t, st.GuestOperationsReady)
	assert.True(t, strings.HasPrefix(st.IPAddress, "10.253."), "a DHCP lease: %q", st.IPAddress)
	assert.Equal(t, []string{st.IPAddress}, st.GuestNetIPs)

	customizedClone(ctx, t, env, "fixed", &types.CustomizationFixedIp{IpAddress: "10.0.0.12"})
	assert.Equal(t, "10.0.0.12", env.MustInspect("fixed").IPAddress)

	env.SetDHCP(false)
	customizedClone(ctx, t, env, "nodhcp", &types.CustomizationDhcpIpGenerator{})
	st = env.MustInspect("nodhcp")
	require.True(t, st.GuestOperationsReady)
	assert.Empty(t, st.IPAddress, "no DHCP server: no address")
	assert.Empty(t, st.GuestNetIPs)
}

// TestCustomizedCloneOfANeverReadyGuestGetsNoLease: a guest that never
// becomes ready (its Tools never run) never reports a DHCP lease.
func TestCustomizedCloneOfANeverReadyGuestGetsNoLease(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{ReadyDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	customizedClone(ctx, t, env, "booting", &types.CustomizationDhcpIpGenerator{})
	st := env.MustInspect("booting")
	assert.False(t, st.GuestOperationsReady)
	assert.Empty(t, st.IPAddress)
}
