package vsphere

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// ruleV1Model is a V1 model whose template (named after the model), path
// ("group/name") and base image are three different names.
func ruleV1Model() sdk.Model {
	return sdk.Model{
		Name: "mymodel", Type: sdk.VSphere, Group: &sdk.Group{Name: "shared.infra"},
		UserLastModified:    warmNow.Add(-time.Hour),
		ModelVirtualMachine: sdk.ModelVirtualMachine{Image: "debian12", Cmd: "./worker"},
	}
}

// ruleVMs is an inventory where each rule that is not modelref's finds
// another VM, each with its own reference and hardware: a VM (not a
// template) named after the V2 image, another hatchery's template of the
// V1 model listed first, a template of ours named after the V1 model's
// path built from another version, then this hatchery's template of the
// V1 model and the image's template.
func ruleVMs(m sdk.Model) []inventory.VM {
	tpl := func(ref, name string, cpus int32, a *inventory.Annotation) inventory.VM {
		return inventory.VM{Ref: vctypes.Ref{Type: "VirtualMachine", Value: ref}, Name: name, Template: true,
			NumCPU: cpus, MemoryMB: 1024, PowerState: vctypes.PoweredOff, Annotation: a}
	}
	ours := func(lastModified string) *inventory.Annotation {
		return &inventory.Annotation{HatcheryName: warmHatcheryName, Model: true, WorkerModelPath: m.Path(), WorkerModelLastModified: lastModified}
	}
	notTemplate := tpl("vm-debian12-vm", "debian12", 2, nil)
	notTemplate.Template = false
	return []inventory.VM{
		notTemplate,
		tpl("vm-mymodel-foreign", "mymodel", 5, &inventory.Annotation{HatcheryName: "hatch-other", Model: true, WorkerModelPath: m.Path(), WorkerModelLastModified: modelLastModified(&m)}),
		tpl("vm-mymodel-path", m.Path(), 7, ours("1")),
		tpl("vm-mymodel-ours", "mymodel", 3, ours(modelLastModified(&m))),
		tpl("vm-debian12-tpl", "debian12", 6, nil),
	}
}

// TestOneTemplateRuleEveryCaller drives every caller that needs the
// template of a model (docs/design.md#which-template) with a V1 model, a
// V2 model and their warm-pool entries, and asserts they all land on the
// same template (the same reference, the same hardware): the spawn's
// resolution and the reference it clones, the admission's footprint, the
// warm pool's clone and its provisioning footprint, and the V1
// registration check. A caller with its own rule (the V1 model's path,
// the base image first, any VM or any hatchery's template of that name)
// finds another VM of ruleVMs, and the test fails on its reference or
// its vCPUs.
func TestOneTemplateRuleEveryCaller(t *testing.T) {
	t.Parallel()
	m := ruleV1Model()
	cases := []struct {
		name     string
		model    sdk.WorkerStarterWorkerModel
		entry    config.WorkerProvisioning
		wantRef  string
		wantCPUs int64
	}{
		{name: "v1", model: sdk.WorkerStarterWorkerModel{ModelV1: &m}, entry: config.WorkerProvisioning{ModelPath: m.Path(), Number: 1},
			wantRef: "vm-mymodel-ours", wantCPUs: 3},
		{name: "v2", model: v2Model("debian12"), entry: config.WorkerProvisioning{ModelVMWare: "debian12", Number: 1},
			wantRef: "vm-debian12-tpl", wantCPUs: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			newEnv := func(cfg *config.Config) *warmEnv {
				e := newWarmEnv(t, cfg, ruleVMs(m), &cdsclienttest.Fake{Models: []sdk.Model{m}})
				e.vs.EXPECT().LoadResourcePool(gomock.Any()).Return(vctypes.Ref{}, errors.New("no pool in this test")).AnyTimes()
				return e
			}
			cfg := warmConfig()
			cfg.MaxCPUs = 64
			e := newEnv(cfg)
			vms := ruleVMs(m)

			// The spawn: the template it resolves, then the reference its
			// clone reads (cloneVMBoot's loadTemplate).
			tpl, err := e.h.spawnTemplate(vms, modelref.Of(tc.model), tc.model)
			require.NoError(t, err)
			require.Equal(t, modelref.Of(tc.model), tpl)
			got, err := e.h.loadTemplate(ctx, vms, tpl)
			require.NoError(t, err)
			require.Equal(t, tc.wantRef, got.Ref.Value, "spawn clones")

			// The admission: the next worker's footprint is the template's.
			ok, err := e.h.CanAllocateResources(ctx, tc.model, "job-"+tc.name, nil)
			require.NoError(t, err)
			require.True(t, ok)
			n, cpus, _ := e.h.ReservedFootprint()
			require.Equal(t, 1, n)
			require.Equal(t, tc.wantCPUs, cpus, "admission's footprint")

			// The warm pool: the template a pool entry of the model clones,
			// and the footprint its provisioning reserves meanwhile.
			pcfg := warmConfig()
			pcfg.MaxCPUs = 64
			pcfg.WorkerProvisioning = []config.WorkerProvisioning{tc.entry}
			pe := newEnv(pcfg)
			var mu sync.Mutex
			var cloned []string
			var poolCPUs []int64
			pe.h.pool.Clone = poolClone(func(ctx context.Context, template modelref.Template, _ string, _ *inventory.Annotation, _ *config.Flavor) (vctypes.Ref, error) {
				ref, err := pe.h.loadTemplate(ctx, vms, template)
				require.NoError(t, err)
				_, c, _ := pe.h.ReservedFootprint()
				mu.Lock()
				cloned = append(cloned, ref.Ref.Value)
				poolCPUs = append(poolCPUs, c)
				mu.Unlock()
				return vctypes.Ref{}, errors.New("stop after the clone's template")
			})
			pe.h.pool.Provision(ctx)
			mu.Lock()
			require.Equal(t, []string{tc.wantRef}, cloned, "the warm pool clones")
			require.Equal(t, []int64{tc.wantCPUs}, poolCPUs, "the provisioning's footprint")
			mu.Unlock()

			if !tc.model.IsV1() {
				return
			}
			// The V1 registration check finds the same template (built
			// from the model's current version: no registration needed).
			found, ok := e.h.findModelTemplate(vms, &m)
			require.True(t, ok)
			require.Equal(t, tc.wantRef, found.Ref.Value, "registration check")
			require.False(t, e.h.NeedRegistration(ctx, &m))
			// A registration clones the base image, the template the model's
			// own is built from.
			base, err := e.h.loadTemplate(ctx, vms, modelref.BaseOf(tc.model))
			require.NoError(t, err)
			require.Equal(t, "vm-debian12-tpl", base.Ref.Value, "registration clones the base image")
		})
	}
}
