package vsphere

import (
	"fmt"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient/cdsclienttest"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/golang/mock/gomock"
	"github.com/vmware/govmomi/vim25/types"
)

// warmHatcheryName is the hatchery under test in the warm-pool tests.
const warmHatcheryName = testutil.Hatchery

// warmNow is the fixed clock of the warm-pool tests.
var warmNow = testutil.Epoch

// warmCalls are the CDS API calls the warm pool and cleanup make: any
// other panics (warmAPI).
var warmCalls = []string{
	"QueueJobInfo", "V2QueueJobInfo", "V2Region", "QueueJobRelease", "V2QueueJobRelease",
	"WorkerList", "V2WorkerList", "WorkerModelsEnabled", "WorkerModelSpawnError",
}

// warmAPI makes api the CDS API of the warm-pool and cleanup tests: every
// job it does not say otherwise of is held by this hatchery
// (warmHatcheryName), and it answers only warmCalls. It returns api.
func warmAPI(api *cdsclienttest.Fake) *cdsclienttest.Fake {
	api.Hatchery = warmHatcheryName
	api.Allow = warmCalls
	return api
}

// warmConfig is a small valid configuration for hatch-a.
func warmConfig() *config.Config {
	return &config.Config{
		CommonConfiguration:        hatchery.CommonConfiguration{Name: warmHatcheryName},
		WorkerTTL:                  120,
		WorkerRegistrationTTL:      10,
		WorkerProvisioningInterval: 60,
		WorkerProvisioningPoolSize: 2,
		Flavors: []config.Flavor{
			{Name: "small", CPUs: 1, MemoryMB: 1024},
			{Name: "large", CPUs: 4, MemoryMB: 8192},
		},
	}
}

// warmEnv is a hatchery on a strict gomock vctypes.Port and a fixed inventory.
type warmEnv struct {
	h    *HatcheryVSphere
	vs   *mock_vsphere.MockPort
	inv  *inventorytest.Fixed
	cds  *cdsclienttest.Fake
	ctrl *gomock.Controller
}

// newWarmEnv builds the hatchery. Every vCenter call must be expected by
// the test. cds nil leaves the hatchery without an API client; else it is
// the hatchery's API (warmAPI).
func newWarmEnv(t *testing.T, cfg *config.Config, vms []inventory.VM, cds *cdsclienttest.Fake) *warmEnv {
	t.Helper()
	e := newWarmEnvNoCAS(t, cfg, vms, cds)
	// A claim's first write is its compare-and-swap (warmpool.Pool.Claim): no
	// other instance here, it always wins. Registered first, it matches
	// only a spec carrying a changeVersion, so the tests' own reconfigure
	// expectations still see every other reconfigure.
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), claimCAS{}).Return(nil).AnyTimes()
	return e
}

// newWarmEnvNoCAS is newWarmEnv without the claims' compare-and-swap
// expected: the test expects it itself.
func newWarmEnvNoCAS(t *testing.T, cfg *config.Config, vms []inventory.VM, cds *cdsclienttest.Fake) *warmEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	expectIPLocks(vs, cfg)
	inv := inventorytest.New(vms...)
	o := Options{
		Config:    cfg,
		Client:    vs,
		Inventory: inv,
		Logger:    testutil.DiscardLogger(),
		Now:       func() time.Time { return warmNow },
	}
	if cds != nil {
		o.CDS = warmAPI(cds)
	}
	h, err := New(o)
	if err != nil {
		t.Fatalf("new hatchery: %v", err)
	}
	checkLifeBugs(t, h)
	return &warmEnv{h: h, vs: vs, inv: inv, cds: cds, ctrl: ctrl}
}

// claimCAS matches the reconfigure of a claim's compare-and-swap: a
// change carrying a changeVersion and a record that is no longer a
// provisioning one.
type claimCAS struct{}

func (claimCAS) Matches(x interface{}) bool {
	c, ok := x.(vctypes.ConfigChange)
	if !ok || c.ChangeVersion == "" || c.Record == nil {
		return false
	}
	a, err := inventory.ParseAnnotation(c.Record.Notes)
	return err == nil && !a.Provisioning
}

func (claimCAS) String() string { return "a claim's compare-and-swap reconfigure" }

// warmRef is the fake reference of a VM named name.
func warmRef(name string) vctypes.Ref {
	return vctypes.Ref{Type: "VirtualMachine", Value: "vm-" + name}
}

// warmRefIs matches the reference of the VM named name.
type warmRefIs string

// Matches takes the reference in either of the port's vocabularies: the
// power, destroy, wait and reconfigure methods take a vctypes.Ref, the
// clone still a govmomi reference.
func (m warmRefIs) Matches(x interface{}) bool {
	switch o := x.(type) {
	case vctypes.Ref:
		return o == warmRef(string(m))
	case types.ManagedObjectReference:
		return vim.RefOf(o) == warmRef(string(m))
	}
	return false
}

func (m warmRefIs) String() string { return fmt.Sprintf("vm %q", string(m)) }

// vmOpt changes a test VM.
type vmOpt func(*inventory.VM)

func wOn(v *inventory.VM)       { v.PowerState = vctypes.PoweredOn }
func wOff(v *inventory.VM)      { v.PowerState = vctypes.PoweredOff }
func wTemplate(v *inventory.VM) { v.Template = true }

func wCreated(ago time.Duration) vmOpt {
	return func(v *inventory.VM) { v.Annotation.Created = warmNow.Add(-ago) }
}

func wStarted(ago time.Duration) vmOpt {
	return func(v *inventory.VM) { t := warmNow.Add(-ago); v.Annotation.WorkerStarted = &t }
}

// wHeld holds the VM for the debug hold until in from warmNow (negative:
// expired).
func wHeld(in time.Duration) vmOpt {
	return func(v *inventory.VM) {
		t := warmNow.Add(in)
		v.Annotation.HeldUntil, v.Annotation.HeldReason = &t, "wait for guest operations ready"
	}
}

func wAnnot(f func(*inventory.Annotation)) vmOpt { return func(v *inventory.VM) { f(v.Annotation) } }

// warmVM is a VM carrying hatch-a's annotation, powered on, created a minute ago.
func warmVM(name string, opts ...vmOpt) inventory.VM {
	v := inventory.VM{
		Ref:        warmRef(name),
		Name:       name,
		PowerState: vctypes.PoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: warmHatcheryName, WorkerName: name, Created: warmNow.Add(-time.Minute)},
		// vCenter's config.changeVersion: a claim's compare-and-swap
		// carries it (claimCAS).
		ChangeVersion: "cv-" + name,
	}
	for _, o := range opts {
		o(&v)
	}
	return v
}

// warmProvVM is an idle provisioned V2 VM of hatch-a for template model.
func warmProvVM(name, model, flavor string, opts ...vmOpt) inventory.VM {
	v := warmVM(name, wOff, wAnnot(func(a *inventory.Annotation) {
		a.Provisioning = true
		a.VMwareModelPath = model
		a.Flavor = flavor
	}))
	for _, o := range opts {
		o(&v)
	}
	return v
}

// warmTpl is a template without annotation (an operator's template).
func warmTpl(name string) inventory.VM {
	return inventory.VM{Ref: warmRef(name), Name: name, Template: true, PowerState: vctypes.PoweredOff}
}

// expectDelete expects vm to be powered off (when on) and destroyed once.
func (e *warmEnv) expectDelete(v inventory.VM) {
	if v.PowerState != vctypes.PoweredOff {
		e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs(v.Name)).Return(nil)
	}
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs(v.Name)).Return(nil)
}
