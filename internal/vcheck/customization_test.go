package vcheck

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// staticConfig is envConfig with a static range whose first address a
// foreign VM holds, named hatch (the address locks' prefix).
func staticConfig(t *testing.T, env *vcsimtest.Env, hatch string) *config.Config {
	t.Helper()
	env.AddVMs([]vcsimtest.ForeignVM{{Name: "someone-else", PoweredOn: true, NumCPU: 1, MemoryMB: 1024, IP: "10.66.0.10"}})
	cfg := envConfig(env, false)
	cfg.CommonConfiguration.Name = hatch
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "10.66.0.10/24", "10.66.0.1", "255.255.255.0", "10.66.0.2"
	return cfg
}

// one is rep's only line of capability.
func one(t *testing.T, rep *Report, capability string) Result {
	t.Helper()
	got := lines(rep, capability)
	require.Len(t, got, 1, capability)
	return got[0]
}

// TestCustomizationStaticAddress: with a static range the check takes an
// address as a spawn does (skipping one a VM of the inventory holds and
// one another instance has locked), customizes the guestops clone with
// it (clonespec.Customization, LinuxPrep), and the guest reports it; the
// run deletes its own address lock and leaves the other instance's.
func TestCustomizationStaticAddress(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	const hatch = "hatch-check-ip"
	cfg := staticConfig(t, env, hatch)
	_, err := env.Client.CreateLock(context.Background(), hatch+ippool.LockPrefix+"10.66.0.11") // another instance's
	require.NoError(t, err)

	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "static"})
	t.Logf("report:\n%s", text(rep))
	addr := one(t, rep, "static address")
	assert.Equal(t, Pass, addr.Status)
	assert.Contains(t, addr.Detail, "took 10.66.0.12 through its lock "+hatch+"-ip-10.66.0.12")
	c := one(t, rep, "customization")
	assert.Equal(t, Pass, c.Status, c.Detail)
	assert.Equal(t, "LinuxPrep with static 10.66.0.12: the guest reported 10.66.0.12", c.Detail)
	assert.False(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
	locks, err := env.Client.ListLocks(context.Background(), hatch+ippool.LockPrefix)
	require.NoError(t, err)
	assert.Len(t, locks, 1, "the run's lock is deleted, the other instance's kept")
	assert.Contains(t, locks, hatch+ippool.LockPrefix+"10.66.0.11")
}

// TestCustomizationWithoutAddressFails: a customized guest that never
// gets an address (DHCP asked on a network without DHCP server: the
// simulator's Env.SetDHCP(false)) fails the line within the guest
// timeout, with the fix naming DHCP and the template's customization;
// the rest of the guest side still runs.
func TestCustomizationWithoutAddressFails(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	env.SetDHCP(false)
	rep := Run(context.Background(), envConfig(env, false), envDialer(env), Options{RunID: "nodhcp", GuestReadyTimeout: 300 * time.Millisecond})
	t.Logf("report:\n%s", text(rep))
	assert.Equal(t, Pass, one(t, rep, "guest ready").Status)
	c := one(t, rep, "customization")
	assert.Equal(t, Fail, c.Status)
	assert.True(t, c.Needed)
	assert.Contains(t, c.Detail, "LinuxPrep with DHCP: the guest reported no address within 300ms")
	assert.Contains(t, c.Fix, "a DHCP server on the VMs' network")
	assert.Contains(t, c.Fix, "open-vm-tools")
	assert.Equal(t, Pass, one(t, rep, "guest program").Status)
	assert.True(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestCloudInitStaticAddress: a cloud-init model's clone carries the
// static address in its metadata's network config (internal/cloudinit,
// as a worker's); the guest (the simulator's FakeCloudInit) takes it and
// the cloud-init line reports it; no customization line (cloud-init
// configures the network, a customization would race it).
func TestCloudInitStaticAddress(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := staticConfig(t, env, "hatch-check-ci")
	cfg.Models[0].Bootstrap = config.BootstrapCloudInit
	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "cistatic"})
	t.Logf("report:\n%s", text(rep))
	assert.Equal(t, Pass, one(t, rep, "static address").Status)
	ci := one(t, rep, "cloud-init")
	assert.Equal(t, Pass, ci.Status, ci.Detail)
	assert.Contains(t, ci.Detail, "(static 10.66.0.11) and reported 10.66.0.11")
	assert.Empty(t, lines(rep, "customization"))
	boots := env.CloudInit.Boots()
	require.Len(t, boots, 1)
	assert.Equal(t, "10.66.0.11", boots[0].IP)
	assert.Contains(t, string(boots[0].Metadata), "10.66.0.11/24")
	assert.False(t, rep.Failed())
	assert.Empty(t, scratchLeft(t, env))
}

// TestCustomizationWindowsSysprep: a Windows model's clone is customized
// by sysprep with DHCP, as a spawn's, and its guest reports its lease.
func TestCustomizationWindowsSysprep(t *testing.T) {
	t.Parallel()
	const win = "win2022"
	env := vcsimtest.Start(t, vcsimtest.Options{Templates: []vcsimtest.Template{{Name: win, GuestID: vcsimtest.WindowsGuestID}}})
	cfg := env.Config()
	cfg.Models = []config.GuestCredential{{ModelVMWare: win, OS: config.OSWindows, Username: vcsimtest.DefaultGuestUser, Password: vcsimtest.DefaultGuestPassword}}
	cfg.CommonConfiguration.API.HTTP.URL = "http://127.0.0.1:8081"
	rep := Run(context.Background(), cfg, envDialer(env), Options{RunID: "win"})
	t.Logf("report:\n%s", text(rep))
	c := one(t, rep, "customization")
	assert.Equal(t, Pass, c.Status, c.Detail)
	assert.Contains(t, c.Detail, "sysprep with DHCP: the guest reported 10.253.")
}
