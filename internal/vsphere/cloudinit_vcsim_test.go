package vsphere_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// ciAPI is a CDS API whose V2 worker list the test sets (ciRegister):
// any call but the two worker lists panics.
func ciAPI() *cdsclienttest.Fake {
	return &cdsclienttest.Fake{Allow: []string{"WorkerList", "V2WorkerList"}}
}

// ciRegister makes the API list the V2 worker name, waiting: the worker
// registered.
func ciRegister(api *cdsclienttest.Fake, name string) {
	api.AddV2Worker(sdk.V2Worker{Name: name, Status: sdk.StatusWaiting})
}

// Secrets of the cloud-init tests: none of them may reach the VM, except
// the worker token inside the userdata.
const (
	ciGuestPassword = "guest-pw-never-in-vm"
	ciWorkerToken   = "worker-jwt-secret-token"
)

// ciConfig is a hatchery on env with a static IP plan whose model
// debian12 boots through cloud-init. The entry still names a guest account:
// it must be neither needed nor written anywhere.
func ciConfig(env *vcsimtest.Env) *config.Config {
	cfg := env.Config()
	cfg.CommonConfiguration.Name = "hatch-ci"
	cfg.IPRange, cfg.Gateway, cfg.SubnetMask, cfg.DNS = "192.168.88.10/24", "192.168.88.1", "255.255.255.0", "192.168.88.2"
	cfg.WorkerRegistrationTTL = 10
	cfg.WorkerTTL = 120
	cfg.GuestCredentials = []config.GuestCredential{{
		ModelVMWare: vcsimtest.DefaultTemplate, Username: "root", Password: ciGuestPassword,
		PreStartScript: "echo prestart", Bootstrap: config.BootstrapCloudInit,
	}}
	return cfg
}

func ciArgs(worker, job string) spawn.Arguments {
	wc := spawn.WorkerConfig{Name: worker, HatcheryName: "hatch-ci", APIEndpoint: "http://api", APIToken: ciWorkerToken, RunJobID: job, Model: "m"}
	return spawn.Arguments{
		WorkerName: worker, JobID: job, HatcheryName: "hatch-ci", WorkerConfig: wc,
		Model: sdk.WorkerStarterWorkerModel{
			// No username/password in the model either.
			ModelV2:     &sdk.V2WorkerModel{Name: "m", Type: sdk.VSphere},
			VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: vcsimtest.DefaultTemplate},
			PreCmd:      "echo precmd",
			Cmd:         "./worker --name={{.Name}}",
			PostCmd:     "shutdown -h now",
		},
	}
}

// TestVcsimCloudInitClone: a cloud-init model's clone carries the guestinfo
// metadata and userdata (gzip+base64) — valid cloud-config holding the
// static IP plan and the worker command with CDS_CONFIG — and no secret
// but the worker token; the guest boots from it (FakeCloudInit) without any
// guest operation; once the API lists the worker the userdata is removed.
func TestVcsimCloudInitClone(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := ciConfig(env)
	api := ciAPI()
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, CDS: api, Inventory: inv})
	require.NoError(t, err)

	args := ciArgs("worker-ci-1", "run-ci-1")
	require.NoError(t, h.SpawnWorker(env.Context(), args))

	st := env.MustInspect("worker-ci-1")
	assert.Equal(t, "gzip+base64", st.ExtraConfig[cloudinit.GuestinfoMetadataEncoding])
	assert.Equal(t, "gzip+base64", st.ExtraConfig[cloudinit.GuestinfoUserdataEncoding])
	mdRaw, err := cloudinit.DecodeGuestinfo(st.ExtraConfig[cloudinit.GuestinfoMetadata], st.ExtraConfig[cloudinit.GuestinfoMetadataEncoding])
	require.NoError(t, err)
	udRaw, err := cloudinit.DecodeGuestinfo(st.ExtraConfig[cloudinit.GuestinfoUserdata], st.ExtraConfig[cloudinit.GuestinfoUserdataEncoding])
	require.NoError(t, err)

	md, err := cloudinit.ParseMetadata(mdRaw)
	require.NoError(t, err)
	assert.Equal(t, "worker-ci-1", md.LocalHostname)
	assert.True(t, strings.HasPrefix(md.InstanceID, "worker-ci-1-"), "instance id %q is the worker's", md.InstanceID)
	require.NotNil(t, md.Network, "static IP plan in the metadata")
	require.Len(t, md.Network.Ethernets, 1)
	for _, eth := range md.Network.Ethernets {
		assert.False(t, eth.DHCP4)
		assert.Equal(t, []string{"192.168.88.10/24"}, eth.Addresses)
		assert.Equal(t, []cloudinit.Route{{To: "0.0.0.0/0", Via: "192.168.88.1"}}, eth.Routes)
		require.NotNil(t, eth.Nameservers)
		assert.Equal(t, []string{"192.168.88.2"}, eth.Nameservers.Addresses)
	}

	ud, err := cloudinit.ParseCloudConfig(udRaw)
	require.NoError(t, err)
	testutil.CheckCloudConfig(t, udRaw)
	files := map[string]cloudinit.File{}
	for _, f := range ud.WriteFiles {
		files[f.Path] = f
	}
	cfgFile, ok := files[cloudinit.ConfigPath]
	require.True(t, ok, "userdata writes the worker config")
	assert.Equal(t, "0600", cfgFile.Permissions)
	got, err := spawn.DecodeWorkerConfig(cfgFile.Content)
	require.NoError(t, err)
	assert.Equal(t, args.WorkerConfig, got, "the worker config, token included, as CDS_CONFIG carries it")
	script, ok := files[cloudinit.ScriptPath]
	require.True(t, ok, "userdata writes the worker script")
	assert.Contains(t, script.Content, "export CDS_CONFIG\n")
	assert.Contains(t, script.Content, "echo prestart\necho precmd\n./worker --name=worker-ci-1\nshutdown -h now\n",
		"preStartScript, PreCmd, Cmd rendered, PostCmd: the guest-operations script")
	require.Len(t, ud.Runcmd, 1)
	assert.Contains(t, strings.Join(ud.Runcmd[0], " "), cloudinit.ScriptPath)

	// No secret but the token, and the token only in the userdata.
	for k, v := range st.ExtraConfig {
		for _, secret := range []string{ciGuestPassword, env.Password, ciWorkerToken, args.WorkerConfig.EncodeBase64()} {
			assert.NotContains(t, v, secret, "extraConfig %s", k)
		}
	}
	for _, secret := range []string{ciGuestPassword, env.Password, ciWorkerToken} {
		assert.NotContains(t, string(mdRaw), secret)
		assert.NotContains(t, string(udRaw), secret, "the token is only inside the base64 CDS_CONFIG")
		assert.NotContains(t, st.Annotation, secret)
	}
	assert.NotContains(t, st.Annotation, args.WorkerConfig.EncodeBase64())

	// The guest booted from the userdata and took the static address; no
	// guest operation was made.
	assert.Empty(t, env.Guest.CallsFor("worker-ci-1"), "no guest operation for a cloud-init model")
	boots := env.CloudInit.Boots()
	require.Len(t, boots, 1)
	assert.Empty(t, boots[0].Err)
	assert.Equal(t, "192.168.88.10", boots[0].IP)
	assert.Equal(t, args.WorkerConfig.EncodeBase64(), boots[0].CDSConfig)
	a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err)
	assert.NotNil(t, a.WorkerStarted, "the start is recorded once the guest has its IP")

	// Not registered yet: a cleanup pass leaves the userdata.
	h.WarmKillAwolServersPass(env.Context())
	assert.NotEmpty(t, env.MustInspect("worker-ci-1").ExtraConfig[cloudinit.GuestinfoUserdata])

	ciRegister(api, "worker-ci-1")
	h.WarmKillAwolServersPass(env.Context())
	after := env.MustInspect("worker-ci-1")
	assert.Empty(t, after.ExtraConfig[cloudinit.GuestinfoUserdata], "token removed once the worker registered")
	assert.Empty(t, after.ExtraConfig[cloudinit.GuestinfoUserdataEncoding])
	assert.NotEmpty(t, after.ExtraConfig[cloudinit.GuestinfoMetadata], "metadata (no secret) stays")
	assert.Empty(t, env.Guest.Calls(), "still no guest operation")
}

// TestVcsimCloudInitClaimedPoolVM: a claimed powered-off pool VM of a
// cloud-init model gets the guestinfo in the reconfigure made before its
// power on (new instance id, hostname = worker name, the VM's static IP),
// and boots from it without a guest operation.
func TestVcsimCloudInitClaimedPoolVM(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	cfg := ciConfig(env)
	cfg.WorkerProvisioning = []config.WorkerProvisioning{{ModelVMWare: vcsimtest.DefaultTemplate, Number: 1}}
	cfg.WorkerProvisioningPoolSize = 1
	inv := env.Inventory(cfg)
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client, CDS: ciAPI(), Inventory: inv})
	require.NoError(t, err)
	h.WarmProvisioningPass(env.Context())
	env.WaitInventory(inv)
	require.Empty(t, env.CloudInit.Boots(), "the pool VM was provisioned without userdata")
	var pool []inventory.VM
	for _, v := range warmVcsimVMs(t, env) {
		if v.HasPrefix("warmpool-v2-") {
			pool = append(pool, v)
		}
	}
	require.Len(t, pool, 1)

	args := ciArgs("worker-ci-2", "run-ci-2")
	require.NoError(t, h.SpawnWorker(env.Context(), args))

	st := env.MustInspect("worker-ci-2")
	require.Equal(t, pool[0].Ref, vim.RefOf(st.Ref), "the worker is the claimed pool VM, renamed")
	a, err := inventory.ParseAnnotation(st.ExtraConfig[inventory.AnnotationMirrorKey])
	require.NoError(t, err)
	assert.False(t, a.Provisioning)
	require.NotEmpty(t, a.IPAddress)
	boots := env.CloudInit.Boots()
	require.Len(t, boots, 1)
	b := boots[0]
	assert.Empty(t, b.Err)
	assert.Equal(t, "worker-ci-2", b.VM)
	assert.Equal(t, "worker-ci-2", b.Hostname)
	assert.True(t, strings.HasPrefix(b.InstanceID, "worker-ci-2-"), "new instance id: %q", b.InstanceID)
	assert.Equal(t, a.IPAddress, b.IP, "the pool VM's static IP in the metadata")
	assert.Equal(t, args.WorkerConfig.EncodeBase64(), b.CDSConfig)
	testutil.CheckCloudConfig(t, b.Userdata)
	assert.Empty(t, env.Guest.CallsFor("worker-ci-2"), "no guest operation for a cloud-init model")
}

// TestVcsimCloudInitRegisterV1Model: a V1 model set to cloud-init is
// registered without guest credentials: the tmp VM boots from userdata
// running "<cmd> register" and PostCmd (the test powers it off, standing
// in for PostCmd), no guest operation is made, and the template it
// becomes carries no guestinfo (every clone would copy it).
func TestVcsimCloudInitRegisterV1Model(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	ctx, cancel := context.WithTimeout(env.Context(), 30*time.Second)
	defer cancel()
	cfg := env.Config()
	cfg.CommonConfiguration.Name = "hatch-ci-v1"
	cfg.GuestCredentials = []config.GuestCredential{{ModelPath: "shared.infra/ci-model", Bootstrap: config.BootstrapCloudInit}}
	h, err := vsphere.New(vsphere.Options{Config: cfg, Client: env.Client})
	require.NoError(t, err)

	model := &sdk.Model{
		Name: "ci-model", Type: sdk.VSphere, Group: &sdk.Group{Name: "shared.infra"},
		UserLastModified:    time.Unix(1700000000, 0),
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: vcsimtest.DefaultTemplate, Cmd: "./worker", PostCmd: "sudo shutdown -h now"},
	}
	regCfg := spawn.WorkerConfig{Name: "register-ci-model-1", HatcheryName: "hatch-ci-v1", APIEndpoint: "http://api", APIToken: ciWorkerToken, Model: model.Path()}
	args := spawn.Arguments{WorkerName: "register-ci-model-1", HatcheryName: "hatch-ci-v1", Model: sdk.WorkerStarterWorkerModel{ModelV1: model}, RegisterOnly: true, WorkerConfig: regCfg}
	done := make(chan error, 1)
	go func() { done <- h.SpawnWorker(ctx, args) }()

	boots, err := env.CloudInit.WaitForBoots(ctx, 1)
	require.NoError(t, err)
	b := boots[0]
	assert.Equal(t, "ci-model-tmp", b.VM)
	assert.Empty(t, b.Err)
	assert.Equal(t, regCfg.EncodeBase64(), b.CDSConfig)
	cc, err := cloudinit.ParseCloudConfig(b.Userdata)
	require.NoError(t, err)
	var script string
	for _, f := range cc.WriteFiles {
		if f.Path == cloudinit.ScriptPath {
			script = f.Content
		}
	}
	assert.Contains(t, script, "\n./worker register\nsudo shutdown -h now\n")
	tmp := env.MustInspect("ci-model-tmp")
	require.NoError(t, env.Client.ShutdownVirtualMachine(ctx, vim.RefOf(tmp.Ref)))
	select {
	case err := <-done:
		require.NoError(t, err, "registration")
	case <-ctx.Done():
		t.Fatal("registration did not finish after the tmp vm powered off")
	}

	tpl := env.MustInspect("ci-model")
	assert.True(t, tpl.Template)
	for _, k := range []string{cloudinit.GuestinfoMetadata, cloudinit.GuestinfoMetadataEncoding, cloudinit.GuestinfoUserdata, cloudinit.GuestinfoUserdataEncoding} {
		assert.Empty(t, tpl.ExtraConfig[k], "template keeps no %s", k)
	}
	assert.Empty(t, env.Guest.Calls(), "no guest operation")
}
