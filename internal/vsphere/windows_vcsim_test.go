package vsphere_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Secrets of the Windows tests: none may reach a command line, a log, the
// annotation or the clone specification.
const (
	winTemplate      = "win2022"
	winGuestUser     = "cds"
	winGuestPassword = "win-guest-pw-secret"
	winWorkerToken   = "win-worker-jwt-secret"
)

// winEnv is a simulator with the Linux default template and a Windows one
// (guest id windows2019srv_64Guest: vcsim reports the windowsGuest
// family, and FakeGuest plays a Windows guest in its clones).
func winEnv(t *testing.T) *vcsimtest.Env {
	t.Helper()
	env := vcsimtest.Start(t, vcsimtest.Options{
		Templates:     []vcsimtest.Template{{Name: vcsimtest.DefaultTemplate}, {Name: winTemplate, GuestID: vcsimtest.WindowsGuestID}},
		GuestUser:     winGuestUser,
		GuestPassword: winGuestPassword,
	})
	return env
}

// winConfig is a hatchery with a static IP plan whose model win2022 is
// Windows (os = "windows"), its guest account in the entry.
func winConfig(env *vcsimtest.Env, bootstrap string) *config.Config {
	cfg := env.Config()
	cfg.CommonConfiguration.Name = "hatch-win"
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.99.10/24", "192.168.99.1", "255.255.255.0", "192.168.99.2"
	cfg.WorkerRegistrationTTL = 10
	cfg.WorkerTTL = 120
	cfg.GuestCredentials = []config.GuestCredential{{
		ModelVMWare: winTemplate, Username: winGuestUser, Password: winGuestPassword,
		OS: config.OSWindows, Bootstrap: bootstrap, PreStartScript: "Write-Output prestart",
	}}
	return cfg
}

// winArgs is a V2 job on the Windows model with the commands the
// framework gives it (config.Config.V2CommandsOf: the Windows defaults).
func winArgs(cfg *config.Config, worker, job string) spawn.Arguments {
	wc := spawn.WorkerConfig{Name: worker, HatcheryName: "hatch-win", APIEndpoint: "http://api.example:8081", APIToken: winWorkerToken, RunJobID: job, Model: "win"}
	m := sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "win", Type: sdk.VSphere, OSArch: "windows/amd64"},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: winTemplate},
	}
	cmds := cfg.V2CommandsOf(m)
	m.PreCmd, m.Cmd, m.PostCmd = cmds.PreCmd, cmds.Cmd, cmds.PostCmd
	return spawn.Arguments{WorkerName: worker, JobID: job, HatcheryName: "hatch-win", WorkerConfig: wc, Model: m}
}

// TestVcsimWindowsGuestOps: a Windows model's worker is cloned with a
// sysprep customization (computer name = the VM's name, the static IP),
// probed and launched with PowerShell — checked by the fake guest playing
// a Windows guest — with the worker config and the script in the
// program's environment only: the script downloads windows/amd64 as
// worker.exe, runs it, and powers the VM off at the end. No secret is on
// a command line, in a log or in the annotation.
func TestVcsimWindowsGuestOps(t *testing.T) {
	t.Parallel()
	env := winEnv(t)
	cfg := winConfig(env, "")
	client := &viRecordingClient{Port: env.Client}
	var logs testutil.SyncBuffer
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Inventory: inv, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)

	args := winArgs(cfg, "worker-win-1", "run-win-1")
	require.NoError(t, h.SpawnWorker(env.Context(), args))

	// The clone: sysprep with the name and the static IP.
	spec := client.clone(t, "worker-win-1").customization(t)
	require.NotNil(t, spec.Customization)
	sp, ok := spec.Customization.Identity.(*types.CustomizationSysprep)
	require.True(t, ok, "a Windows clone is customized by sysprep, not %T", spec.Customization.Identity)
	name, ok := sp.UserData.ComputerName.(*types.CustomizationFixedName)
	require.True(t, ok)
	assert.Equal(t, "worker-win-1", name.Name, "computer name = the job's VM name")
	assert.Empty(t, sp.UserData.ProductId, "no product key")
	assert.Nil(t, sp.GuiUnattended.Password, "no password in the specification")
	require.NotEmpty(t, spec.Customization.NicSettingMap)
	fixed, ok := spec.Customization.NicSettingMap[0].Adapter.Ip.(*types.CustomizationFixedIp)
	require.True(t, ok, "the static address, as the Linux path gives it")
	assert.Equal(t, "192.168.99.10", fixed.IpAddress)
	assert.Equal(t, []string{"192.168.99.1"}, spec.Customization.NicSettingMap[0].Adapter.Gateway)
	st := env.MustInspect("worker-win-1")
	assert.Equal(t, "192.168.99.10", st.IPAddress, "the simulator applied the customization")

	// The guest: a Windows guest accepted the probe and the launch.
	calls := env.Guest.CallsFor("worker-win-1")
	require.NotEmpty(t, calls)
	for _, c := range calls {
		assert.True(t, c.Windows, "the fake played a Windows guest")
		assert.Nil(t, c.Fault, "a Windows guest refused %s %s", c.ProgramPath, c.Arguments)
		assert.True(t, strings.HasSuffix(strings.ToLower(c.ProgramPath), `\powershell.exe`), c.ProgramPath)
		line := c.ProgramPath + " " + c.Arguments
		for _, secret := range []string{winWorkerToken, winGuestPassword, args.WorkerConfig.EncodeBase64(), "worker.exe", "prestart"} {
			assert.NotContains(t, line, secret, "command line")
		}
	}
	launches := env.Guest.WindowsLaunches()
	require.Len(t, launches, 1)
	l := launches[0]
	assert.Equal(t, "worker-win-1", l.VM)
	assert.Equal(t, args.WorkerConfig, l.Config, "the worker config, token included, in CDS_CONFIG")
	assert.Contains(t, l.Script, "Write-Output prestart\n", "the entry's preStartScript")
	assert.Contains(t, l.Script, `"http://api.example:8081/download/worker/windows/amd64" -OutFile .\worker.exe`)
	assert.Contains(t, l.Script, `& .\worker.exe`)
	assert.Contains(t, l.Script, "} finally {\n  Stop-Computer -Force\n}")
	assert.NotContains(t, l.Script, winWorkerToken, "the token is in CDS_CONFIG only")

	a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err)
	assert.NotNil(t, a.WorkerStarted)
	for _, secret := range []string{winWorkerToken, winGuestPassword, args.WorkerConfig.EncodeBase64()} {
		assert.NotContains(t, logs.String(), secret, "logs")
		assert.NotContains(t, st.Annotation, secret)
		for k, v := range st.ExtraConfig {
			assert.NotContains(t, v, secret, "extraConfig %s", k)
		}
	}
}

// TestVcsimLinuxModelBesideWindows: on the same hatchery, a Linux model
// keeps the Linux customization and launch; its guest is no Windows one.
func TestVcsimLinuxModelBesideWindows(t *testing.T) {
	t.Parallel()
	env := winEnv(t)
	cfg := winConfig(env, "")
	client := &viRecordingClient{Port: env.Client}
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, Inventory: inv})
	require.NoError(t, err)
	args := viV2Args("hatch-win", "worker-lin-1", "run-lin-1", "")
	args.Model.VSphereSpec.Username, args.Model.VSphereSpec.Password = winGuestUser, winGuestPassword
	require.NoError(t, h.SpawnWorker(env.Context(), args))
	spec := client.clone(t, "worker-lin-1").customization(t)
	_, ok := spec.Customization.Identity.(*types.CustomizationLinuxPrep)
	assert.True(t, ok, "a Linux model keeps Linux prep")
	c := viLaunch(t, env, "worker-lin-1")
	assert.False(t, c.Windows)
	assert.Empty(t, env.Guest.WindowsLaunches())
}

// TestVcsimWindowsCloudbaseInit: a Windows model set to the guestinfo
// bootstrap is cloned without customization and boots through
// cloudbase-init (FakeCloudInit plays it for the Windows guest family):
// the guestinfo keys, decoded, carry metadata with the instance id and
// the computer name and no network, and a #ps1_sysnative userdata that
// sets the static address, puts CDS_CONFIG in its environment and runs
// the worker script (download of windows/amd64, worker.exe, power-off).
// No guest operation is made; the token is only inside the base64
// CDS_CONFIG of the userdata, as for a Linux cloud-init worker, and the
// userdata is removed once the worker registered.
func TestVcsimWindowsCloudbaseInit(t *testing.T) {
	t.Parallel()
	env := winEnv(t)
	cfg := winConfig(env, config.BootstrapCloudInit)
	client := &viRecordingClient{Port: env.Client}
	api := ciAPI()
	var logs testutil.SyncBuffer
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: client, CDS: api, Inventory: inv, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)

	args := winArgs(cfg, "worker-wci-1", "run-wci-1")
	require.NoError(t, h.SpawnWorker(env.Context(), args))

	assert.Nil(t, client.clone(t, "worker-wci-1").customization(t).Customization, "cloudbase-init names the guest: no sysprep")
	st := env.MustInspect("worker-wci-1")
	assert.Equal(t, cloudinit.GuestinfoEncodingGzipBase64, st.ExtraConfig[cloudinit.GuestinfoMetadataEncoding])
	assert.Equal(t, cloudinit.GuestinfoEncodingGzipBase64, st.ExtraConfig[cloudinit.GuestinfoUserdataEncoding])
	mdRaw, err := cloudinit.DecodeGuestinfo(st.ExtraConfig[cloudinit.GuestinfoMetadata], st.ExtraConfig[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	md, err := cloudinit.ParseMetadata(mdRaw)
	require.NoError(t, err)
	assert.Equal(t, "worker-wci-1", md.LocalHostname, "the computer name")
	assert.True(t, strings.HasPrefix(md.InstanceID, "worker-wci-1-"), md.InstanceID)
	assert.Nil(t, md.Network, "cloudbase-init's network metadata is not used")

	udRaw, err := cloudinit.DecodeGuestinfo(st.ExtraConfig[cloudinit.GuestinfoUserdata], st.ExtraConfig[cloudinit.GuestinfoUserdataEncoding])
	require.NoError(t, err)
	ud := string(udRaw)
	assert.True(t, strings.HasPrefix(ud, "#ps1_sysnative\n"), "a PowerShell userdata: %.40q", ud)
	assert.Contains(t, ud, "New-NetIPAddress -InterfaceIndex $nic.ifIndex -IPAddress '192.168.99.10' -PrefixLength 24 -DefaultGateway '192.168.99.1'")
	assert.Contains(t, ud, "-ServerAddresses @('192.168.99.2')")
	assert.Contains(t, ud, "$env:CDS_CONFIG = '"+args.WorkerConfig.EncodeBase64()+"'\n", "the config in the script's environment")
	assert.Contains(t, ud, "Write-Output prestart\n")
	assert.Contains(t, ud, `"http://api.example:8081/download/worker/windows/amd64" -OutFile .\worker.exe`)
	assert.Contains(t, ud, `& .\worker.exe`)
	assert.True(t, strings.HasSuffix(ud, "} finally {\n  Stop-Computer -Force\n}\n"), "the VM is powered off when the worker ends")
	assert.Less(t, strings.Index(ud, "New-NetIPAddress"), strings.Index(ud, "/download/worker/"), "the address before the download")

	// No secret outside the base64 CDS_CONFIG of the userdata.
	for k, v := range st.ExtraConfig {
		for _, secret := range []string{winGuestPassword, env.Password, winWorkerToken, args.WorkerConfig.EncodeBase64()} {
			assert.NotContains(t, v, secret, "extraConfig %s", k)
		}
	}
	for _, secret := range []string{winGuestPassword, env.Password, winWorkerToken} {
		assert.NotContains(t, string(mdRaw), secret)
		assert.NotContains(t, ud, secret, "the token is only inside the base64 CDS_CONFIG")
		assert.NotContains(t, st.Annotation, secret)
		assert.NotContains(t, logs.String(), secret, "logs")
	}
	assert.NotContains(t, logs.String(), args.WorkerConfig.EncodeBase64())

	// The guest booted through cloudbase-init, took the address the script
	// sets; no guest operation.
	boots := env.CloudInit.Boots()
	require.Len(t, boots, 1)
	assert.True(t, boots[0].Windows)
	assert.Empty(t, boots[0].Err)
	assert.Equal(t, "192.168.99.10", boots[0].IP)
	assert.Equal(t, args.WorkerConfig.EncodeBase64(), boots[0].CDSConfig)
	assert.Empty(t, env.Guest.CallsFor("worker-wci-1"), "no guest operation")

	ciRegister(api, "worker-wci-1")
	h.WarmKillAwolServersPass(env.Context())
	assert.Empty(t, env.MustInspect("worker-wci-1").ExtraConfig[cloudinit.GuestinfoUserdata], "token removed once the worker registered")
}
