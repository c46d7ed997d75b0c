package warmpool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/clonespec"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// The pool's own tests: a Pool on a strict gomock port, a fixed inventory
// and a fake Host, without the hatchery. The tests that drive the pool
// through a hatchery (provisioning, preparation, cleanup) are in
// internal/vsphere.

const testHatchery = testutil.Hatchery

var testNow = testutil.Epoch

// fakeHost is the hatchery's registration of V1 models; any call fails
// the test (the claim makes none). The writes on the pool's VMs go
// through a real custody.Custody on the same strict port: the pool needs
// no hatchery for them.
type fakeHost struct {
	t *testing.T
}

func (h fakeHost) NeedRegistration(context.Context, *sdk.Model) bool {
	h.t.Error("unexpected NeedRegistration")
	return false
}

// poolEnv is a Pool and what it was built on.
type poolEnv struct {
	p   *Pool
	vs  *mock_vsphere.MockPort
	inv *inventorytest.Fixed
}

// newPoolEnv builds the pool; every vCenter call must be expected by the
// test. cas true expects every claim's compare-and-swap, always won.
func newPoolEnv(t *testing.T, vms []inventory.VM, cas bool) *poolEnv {
	t.Helper()
	vs := mock_vsphere.NewMockPort(gomock.NewController(t))
	if cas {
		vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), casAt("")).Return(nil).AnyTimes()
	}
	inv := inventorytest.New(vms...)
	cfg := &config.Config{
		CommonConfiguration: hatchery.CommonConfiguration{Name: testHatchery},
		Flavors:             []config.Flavor{{Name: "small", CPUs: 1, MemoryMB: 1024}, {Name: "large", CPUs: 4, MemoryMB: 8192}},
	}
	life := lifecycle.New(func() time.Time { return testNow })
	now := func() time.Time { return testNow }
	log := testutil.DiscardLogger()
	ips, err := ippool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cust := &custody.Custody{Hatchery: testHatchery, Port: clonespec.VMPort{Port: vs}, Inventory: inv, Life: life, IPs: ips,
		Quarantine: quarantine.New(quarantine.Policy{Threshold: 3, BackoffBase: time.Minute, BackoffMax: time.Hour}, now), Log: log}
	p := &Pool{
		Hatchery: testHatchery, Config: cfg, Port: clonespec.VMPort{Port: vs}, Inventory: inv, Life: life, Custody: cust,
		Admission: func() admission.Admission {
			return admission.Admission{State: admission.NewState(), Hatchery: testHatchery, Config: cfg, Inventory: inv, Port: vs, Now: now}
		},
		Host: fakeHost{t: t},
		Log:  log,
		Now:  now,
	}
	t.Cleanup(func() {
		if bugs := life.Bugs(); len(bugs) > 0 {
			t.Errorf("lifecycle moves refused: %v", bugs)
		}
	})
	return &poolEnv{p: p, vs: vs, inv: inv}
}

// casAt matches a claim's compare-and-swap: a reconfigure carrying
// changeVersion cv ("" = any) whose annotation is no longer a pool VM's.
type casAt string

func (m casAt) Matches(x interface{}) bool {
	spec, ok := x.(types.VirtualMachineConfigSpec)
	if !ok || spec.ChangeVersion == "" || (m != "" && spec.ChangeVersion != string(m)) {
		return false
	}
	a, err := inventory.ParseAnnotation(spec.Annotation)
	return err == nil && !a.Provisioning
}

func (m casAt) String() string { return "a claim's compare-and-swap at changeVersion " + string(m) }

// refOf is the fake reference of the VM named name.
func refOf(name string) vctypes.Ref {
	return vctypes.Ref{Type: "VirtualMachine", Value: "vm-" + name}
}

// refIs matches the reference of the VM named name.
type refIs string

// Matches takes the reference in either of the port's vocabularies: the
// power, destroy and wait methods take a vctypes.Ref, the reconfigure and
// device reads still a govmomi reference (docs/architecture.md, "Where the
// port goes next").
func (m refIs) Matches(x interface{}) bool {
	switch o := x.(type) {
	case types.ManagedObjectReference:
		return vctypes.Ref{Type: o.Type, Value: o.Value} == refOf(string(m))
	case vctypes.Ref:
		return o == refOf(string(m))
	}
	return false
}

func (m refIs) String() string { return fmt.Sprintf("vm %q", string(m)) }

// poolVM is an idle V2 pool VM of hatch-a for template model, pre-sized
// for flavor, powered off, created age ago; change edits it further.
func poolVM(name, model, flavor string, age time.Duration, change ...func(*inventory.VM)) inventory.VM {
	v := inventory.VM{
		Ref: refOf(name), Name: name, PowerState: vctypes.PoweredOff, ChangeVersion: "cv-" + name,
		Annotation: &inventory.Annotation{HatcheryName: testHatchery, WorkerName: name, Created: testNow.Add(-age),
			Provisioning: true, VMwareModelPath: model, Flavor: flavor},
	}
	for _, c := range change {
		c(&v)
	}
	return v
}

func v2Model(image string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{
		ModelV2:     &sdk.V2WorkerModel{Name: "my-model", Type: sdk.VSphere},
		VSphereSpec: sdk.V2WorkerModelVSphereSpec{Image: image},
	}
}

func v1Model(group, name string) sdk.WorkerStarterWorkerModel {
	return sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: name, Type: sdk.VSphere, Group: &sdk.Group{Name: group}}}
}
