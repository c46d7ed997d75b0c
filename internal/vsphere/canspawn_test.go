package vsphere

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
	"github.com/stretchr/testify/assert"
)

func spV1Model() sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{
		Name: "mymodel", Type: sdk.VSphere, Group: &sdk.Group{Name: "shared.infra"},
		UserLastModified:    time.Unix(1700000000, 0),
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12-base", Cmd: "./worker", PostCmd: "sudo shutdown -h now", User: "root", Password: spSecret},
	}}
}

func TestCanSpawn(t *testing.T) {
	t.Parallel()
	v2 := spV2Args().Model
	req := func(typ, val string) []sdk.Requirement { return []sdk.Requirement{{Name: typ, Type: typ, Value: val}} }
	tests := []struct {
		name    string
		model   sdk.WorkerStarterWorkerModel
		jobID   string
		reqs    []sdk.Requirement
		cfg     func(*config.Config)
		vms     []inventory.VM
		pending string
		listErr error
		want    refusal.Reason // "": can spawn
	}{
		{name: "v2 job", model: v2, jobID: "run-1"},
		{name: "v1 job", model: spV1Model(), jobID: "12"},
		{name: "docker model", model: sdk.WorkerStarterWorkerModel{ModelV2: &sdk.V2WorkerModel{Name: "d", Type: sdk.Docker}, Cmd: "x"}, jobID: "1", want: refusal.ReasonModel},
		{name: "service requirement", model: v2, jobID: "1", reqs: req(sdk.ServiceRequirement, "pg"), want: refusal.ReasonRequirement},
		{name: "memory requirement", model: v2, jobID: "1", reqs: req(sdk.MemoryRequirement, "4096"), want: refusal.ReasonRequirement},
		{name: "hostname requirement", model: v2, jobID: "1", reqs: req(sdk.HostnameRequirement, "h"), want: refusal.ReasonRequirement},
		{name: "flavor requirement is served", model: v2, jobID: "1", reqs: req(sdk.FlavorRequirement, "large")},
		{name: "binary requirement is served", model: v2, jobID: "1", reqs: req(sdk.BinaryRequirement, "git")},
		{name: "empty cmd", model: func() sdk.WorkerStarterWorkerModel { m := spV2Args().Model; m.Cmd = " "; return m }(), jobID: "1", want: refusal.ReasonModel},
		{name: "v1 registration", model: spV1Model(), jobID: ""},
		{name: "v2 cannot register", model: v2, jobID: "", want: refusal.ReasonModel},
		{name: "registration with a tmp vm", model: spV1Model(), jobID: "0", vms: []inventory.VM{{Name: "mymodel-tmp"}}, want: refusal.ReasonRegistering},
		{name: "registration with a register vm", model: spV1Model(), jobID: "0", vms: []inventory.VM{{Name: "register-mymodel-abc"}}, want: refusal.ReasonRegistering},
		{name: "registration in flight", model: spV1Model(), jobID: "", pending: "register-mymodel", want: refusal.ReasonSpawning},
		{name: "vm already serves the job", model: v2, jobID: "run-1", vms: []inventory.VM{{Name: "w", Annotation: &inventory.Annotation{HatcheryName: "other", JobID: "run-1"}}}, want: refusal.ReasonServed},
		{name: "vm serves another job", model: v2, jobID: "run-1", vms: []inventory.VM{{Name: "w", Annotation: &inventory.Annotation{HatcheryName: spHatchery, JobID: "run-2"}}}},
		{name: "job pending", model: v2, jobID: "run-1", pending: "run-1", want: refusal.ReasonSpawning},
		{name: "inventory unavailable", model: v2, jobID: "run-1", listErr: errors.New("vcenter down"), want: refusal.ReasonResources},
		{
			name: "no ip left", model: v2, jobID: "run-1", want: refusal.ReasonIP,
			cfg: func(c *config.Config) { c.IPRange = "10.0.0.1/30" },
			vms: []inventory.VM{
				{Name: "a", PowerState: vctypes.PoweredOff, Annotation: &inventory.Annotation{HatcheryName: spHatchery, IPAddress: "10.0.0.1"}},
				{Name: "b", IPAddresses: []string{"10.0.0.2"}},
			},
		},
		{
			name: "one ip left", model: v2, jobID: "run-1",
			cfg: func(c *config.Config) { c.IPRange = "10.0.0.1/30" },
			vms: []inventory.VM{{Name: "a", Annotation: &inventory.Annotation{HatcheryName: spHatchery, IPAddress: "10.0.0.1"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := spConfig()
			if tt.cfg != nil {
				tt.cfg(cfg)
			}
			f := newSpFixture(t, cfg)
			f.inv.Set(tt.vms...)
			f.inv.SetErr(tt.listErr)
			if tt.pending != "" {
				f.h.life.BeginSpawn(tt.pending)
			}
			r := f.h.CanSpawn(context.Background(), tt.model, tt.jobID, tt.reqs)
			if tt.want == "" {
				assert.Nil(t, r)
				return
			}
			if assert.NotNil(t, r) {
				assert.Equal(t, tt.want, r.Reason, r.Error())
				assert.NotEmpty(t, r.Detail, "a refusal says why")
			}
		})
	}
}

func TestWorkersStarted(t *testing.T) {
	t.Parallel()
	f := newSpFixture(t, spConfig())
	ours := &inventory.Annotation{HatcheryName: spHatchery}
	f.inv.Set([]inventory.VM{
		{Name: "worker-1", Annotation: ours},
		{Name: "worker-off", Annotation: ours, PowerState: vctypes.PoweredOff},
		{Name: "warmpool-v2-abc", Annotation: ours},
		{Name: "mymodel-tmp", Annotation: &inventory.Annotation{HatcheryName: spHatchery, RegisterOnly: true, WorkerName: "register-mymodel-x1"}},
		{Name: "mymodel", Template: true, Annotation: &inventory.Annotation{HatcheryName: spHatchery, Model: true}},
		{Name: "foreign", Annotation: &inventory.Annotation{HatcheryName: "other"}},
		{Name: "unannotated"},
	}...)
	got, err := f.h.WorkersStarted(context.Background())
	assert.NoError(t, err)
	assert.Equal(t, []string{"worker-1", "worker-off", "register-mymodel-x1"}, got, "a registration VM is reported under its worker name")
}

func TestNeedRegistration(t *testing.T) {
	t.Parallel()
	m := spV1Model().ModelV1
	tmpl := func(h, lm string, model bool) inventory.VM {
		return inventory.VM{Name: "mymodel", Template: true, Annotation: &inventory.Annotation{HatcheryName: h, Model: model, WorkerModelLastModified: lm}}
	}
	tests := []struct {
		name    string
		flagged bool
		vms     []inventory.VM
		listErr error
		want    bool
	}{
		{name: "up to date", vms: []inventory.VM{tmpl(spHatchery, "1700000000", true)}},
		{name: "flagged by the api", flagged: true, vms: []inventory.VM{tmpl(spHatchery, "1700000000", true)}, want: true},
		{name: "no template", want: true},
		{name: "outdated template", vms: []inventory.VM{tmpl(spHatchery, "1600000000", true)}, want: true},
		{name: "another hatchery's template does not count", vms: []inventory.VM{tmpl("other", "1700000000", true)}, want: true},
		{name: "template without model flag does not count", vms: []inventory.VM{tmpl(spHatchery, "1700000000", false)}, want: true},
		{name: "inventory unavailable", listErr: errors.New("down")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newSpFixture(t, spConfig())
			f.inv.Set(tt.vms...)
			f.inv.SetErr(tt.listErr)
			mm := *m
			mm.NeedRegistration = tt.flagged
			assert.Equal(t, tt.want, f.h.NeedRegistration(context.Background(), &mm))
		})
	}
}

func TestGetDefaultModelV2Name(t *testing.T) {
	t.Parallel()
	models := []config.DefaultWorkerModelsV2{
		{WorkerModelV2: "proj/repo/go", Binaries: []string{"go", "git"}},
		{WorkerModelV2: "proj/repo/node", Binaries: []string{"node", "npm"}},
	}
	bin := func(v ...string) []sdk.Requirement {
		var out []sdk.Requirement
		for _, b := range v {
			out = append(out, sdk.Requirement{Type: sdk.BinaryRequirement, Value: b})
		}
		return out
	}
	tests := []struct {
		name   string
		models []config.DefaultWorkerModelsV2
		reqs   []sdk.Requirement
		want   string
	}{
		{name: "nothing configured", reqs: bin("go")},
		{name: "no binary requirement takes the first", models: models, reqs: []sdk.Requirement{{Type: sdk.FlavorRequirement, Value: "x"}}, want: "proj/repo/go"},
		{name: "binary match", models: models, reqs: bin("npm"), want: "proj/repo/node"},
		{name: "first entry matching any binary", models: models, reqs: bin("npm", "git"), want: "proj/repo/go"},
		{name: "no match", models: models, reqs: bin("rustc"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := spConfig()
			cfg.DefaultWorkerModelsV2 = tt.models
			f := newSpFixture(t, cfg)
			assert.Equal(t, tt.want, f.h.GetDefaultModelV2Name(tt.reqs))
		})
	}
}

func TestGuestCredentials(t *testing.T) {
	t.Parallel()
	v1, v2 := spV1Model(), spV2Args().Model
	tests := []struct {
		name      string
		creds     []config.GuestCredential
		models    []config.GuestCredential
		model     sdk.WorkerStarterWorkerModel
		wantUser  string
		wantPre   string
		wantError bool
	}{
		{name: "v2 from config by template", model: v2, creds: []config.GuestCredential{{ModelVMWare: "other", Username: "x"}, {ModelVMWare: "debian12", Username: "cfg", Password: "p", PreStartScript: "echo hi"}}, wantUser: "cfg", wantPre: "echo hi"},
		{name: "v1 from config by path", model: v1, creds: []config.GuestCredential{{ModelPath: "shared.infra/mymodel", Username: "cfg1", Password: "p"}}, wantUser: "cfg1"},
		{name: "models alias", model: v2, models: []config.GuestCredential{{ModelVMWare: "debian12", Username: "alias", Password: "p"}}, wantUser: "alias"},
		{name: "guestCredentials wins over models", model: v2, creds: []config.GuestCredential{{ModelVMWare: "debian12", Username: "first", Password: "p"}}, models: []config.GuestCredential{{ModelVMWare: "debian12", Username: "second", Password: "p"}}, wantUser: "first"},
		{name: "fallback to the v2 spec", model: v2, wantUser: "admin"},
		{name: "fallback to the v1 model keeps the entry's prestart", model: v1, creds: []config.GuestCredential{{ModelPath: "shared.infra/mymodel", PreStartScript: "mount /x"}}, wantUser: "root", wantPre: "mount /x"},
		{name: "none", model: func() sdk.WorkerStarterWorkerModel { m := spV2Args().Model; m.VSphereSpec.Username = ""; return m }(), wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := spConfig()
			cfg.GuestCredentials, cfg.Models = tt.creds, tt.models
			f := newSpFixture(t, cfg)
			ga, err := f.h.guestCredentials(context.Background(), tt.model)
			if tt.wantError {
				assert.Error(t, err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tt.wantUser, ga.Auth.Username)
			assert.Equal(t, tt.wantPre, ga.PreStartScript)
		})
	}
}
