package vsphere

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory/inventorytest"
	"github.com/cds-contrib/hatchery-vsphere/mock_vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/golang/mock/gomock"
	"github.com/vmware/govmomi/vim25/types"
)

// warmHatcheryName is the hatchery under test in the warm-pool tests.
const warmHatcheryName = "hatch-a"

// warmNow is the fixed clock of the warm-pool tests.
var warmNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// warmCDS is a fake CDS API: only the calls the warm pool and cleanup make
// are implemented; any other call panics through the nil embedded interface.
type warmCDS struct {
	cdsclient.Interface

	mu          sync.Mutex
	v1          []sdk.Worker
	v2          []sdk.V2Worker
	v1Err       error
	v2Err       error
	models      []sdk.Model
	modelsErr   error
	spawnErrors []string // "group/name: error"
	released    []string // "v1:ID" or "v2:REGION:ID", in call order
	v2Region    string   // the region the V2 sign-in answered
	// jobStatus is the status the API shows of a job, by id (V1 decimal);
	// a job not in it is still waiting for its worker (V1 Waiting, V2
	// Scheduling).
	jobStatus map[string]string
	// jobWorker is the worker that took a job, by id ("" none).
	jobWorker map[string]string
	// jobHolder is who books (V1) or took (V2) a job, by id; a job not in
	// it is held by this hatchery (warmHatcheryName), "" by no one.
	jobHolder map[string]string
	// jobGone are the jobs the API no longer knows (V1 403, V2 404).
	jobGone map[string]bool
	// jobErr, when set, answers every job read.
	jobErr error
	// releaseErr, when set, answers every release (recorded all the same).
	releaseErr error
	// jobReads counts the job reads, by id.
	jobReads map[string]int
}

func (c *warmCDS) statusOf(id, waiting string) string {
	if st, ok := c.jobStatus[id]; ok {
		return st
	}
	return waiting
}

// readJob records a read of job id and answers its holder and worker, or
// the error the API would give.
func (c *warmCDS) readJob(id string, gone error) (holder, worker string, err error) {
	if c.jobReads == nil {
		c.jobReads = map[string]int{}
	}
	c.jobReads[id]++
	switch {
	case c.jobErr != nil:
		return "", "", c.jobErr
	case c.jobGone[id]:
		return "", "", gone
	}
	holder = warmHatcheryName
	if h, ok := c.jobHolder[id]; ok {
		holder = h
	}
	return holder, c.jobWorker[id], nil
}

func (c *warmCDS) QueueJobInfo(_ context.Context, id int64) (*sdk.WorkflowNodeJobRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprint(id)
	holder, worker, err := c.readJob(key, &cdsclient.APIError{Status: 403, ID: 11})
	if err != nil {
		return nil, err
	}
	j := &sdk.WorkflowNodeJobRun{ID: id, Status: c.statusOf(key, sdk.StatusWaiting), BookedBy: sdk.Service{Name: holder}}
	j.Job.WorkerName = worker
	return j, nil
}

func (c *warmCDS) V2QueueJobInfo(_ context.Context, _, id string) (*sdk.V2QueueJobInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	holder, worker, err := c.readJob(id, &cdsclient.APIError{Status: 404, ID: 38})
	if err != nil {
		return nil, err
	}
	return &sdk.V2QueueJobInfo{RunJob: sdk.V2WorkflowRunJob{ID: id, Status: c.statusOf(id, sdk.V2StatusScheduling), HatcheryName: holder, WorkerName: worker}}, nil
}

// reads is how many times job id was read.
func (c *warmCDS) reads(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobReads[id]
}

func (c *warmCDS) V2Region() string { return c.v2Region }

func (c *warmCDS) QueueJobRelease(_ context.Context, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, fmt.Sprintf("v1:%d", id))
	return c.releaseErr
}

func (c *warmCDS) V2QueueJobRelease(_ context.Context, region, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, "v2:"+region+":"+id)
	return c.releaseErr
}

func (c *warmCDS) releasedJobs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.released...)
}

func (c *warmCDS) WorkerList(context.Context) ([]sdk.Worker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v1, c.v1Err
}

func (c *warmCDS) V2WorkerList(context.Context) ([]sdk.V2Worker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v2, c.v2Err
}

func (c *warmCDS) WorkerModelsEnabled(context.Context) ([]sdk.Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.models, c.modelsErr
}

func (c *warmCDS) WorkerModelSpawnError(_ context.Context, group, name string, form sdk.SpawnErrorForm) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spawnErrors = append(c.spawnErrors, group+"/"+name+": "+form.Error)
	return nil
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

// warmEnv is a hatchery on a strict gomock vcenter.Port and a fixed inventory.
type warmEnv struct {
	h    *HatcheryVSphere
	vs   *mock_vsphere.MockPort
	inv  *inventorytest.Fixed
	cds  *warmCDS
	ctrl *gomock.Controller
}

// newWarmEnv builds the hatchery. Every vCenter call must be expected by
// the test. cds nil leaves the hatchery without an API client.
func newWarmEnv(t *testing.T, cfg *config.Config, vms []inventory.VM, cds *warmCDS) *warmEnv {
	t.Helper()
	e := newWarmEnvNoCAS(t, cfg, vms, cds)
	// A claim's first write is its compare-and-swap (warmpool.Pool.Claim): no
	// other instance here, it always wins. Registered first, it matches
	// only a spec carrying a changeVersion, so the tests' own reconfigure
	// expectations still see every other reconfigure.
	e.vs.EXPECT().ReconfigureVirtualMachine(gomock.Any(), gomock.Any(), claimCASSpec{}).Return(nil).AnyTimes()
	return e
}

// newWarmEnvNoCAS is newWarmEnv without the claims' compare-and-swap
// expected: the test expects it itself.
func newWarmEnvNoCAS(t *testing.T, cfg *config.Config, vms []inventory.VM, cds *warmCDS) *warmEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	vs := mock_vsphere.NewMockPort(ctrl)
	expectIPLocks(vs, cfg)
	inv := inventorytest.New(vms...)
	o := Options{
		Config:    cfg,
		Client:    vs,
		Inventory: inv,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:       func() time.Time { return warmNow },
	}
	if cds != nil {
		o.CDS = cds
	}
	h, err := New(o)
	if err != nil {
		t.Fatalf("new hatchery: %v", err)
	}
	checkLifeBugs(t, h)
	return &warmEnv{h: h, vs: vs, inv: inv, cds: cds, ctrl: ctrl}
}

// claimCASSpec matches the reconfigure of a claim's compare-and-swap: a
// spec carrying a changeVersion and an annotation that is no longer a
// provisioning one.
type claimCASSpec struct{}

func (claimCASSpec) Matches(x interface{}) bool {
	spec, ok := x.(types.VirtualMachineConfigSpec)
	if !ok || spec.ChangeVersion == "" {
		return false
	}
	a, err := inventory.ParseAnnotation(spec.Annotation)
	return err == nil && !a.Provisioning
}

func (claimCASSpec) String() string { return "a claim's compare-and-swap reconfigure" }

// warmRef is the fake reference of a VM named name.
func warmRef(name string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-" + name}
}

// warmRefIs matches the reference of the VM named name.
type warmRefIs string

func (m warmRefIs) Matches(x interface{}) bool {
	o, ok := x.(types.ManagedObjectReference)
	return ok && o == warmRef(string(m))
}

func (m warmRefIs) String() string { return fmt.Sprintf("vm %q", string(m)) }

// vmOpt changes a test VM.
type vmOpt func(*inventory.VM)

func wOn(v *inventory.VM)       { v.PowerState = types.VirtualMachinePowerStatePoweredOn }
func wOff(v *inventory.VM)      { v.PowerState = types.VirtualMachinePowerStatePoweredOff }
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
		PowerState: types.VirtualMachinePowerStatePoweredOn,
		Annotation: &inventory.Annotation{HatcheryName: warmHatcheryName, WorkerName: name, Created: warmNow.Add(-time.Minute)},
		// vCenter's config.changeVersion: a claim's compare-and-swap
		// carries it (claimCASSpec).
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
	return inventory.VM{Ref: warmRef(name), Name: name, Template: true, PowerState: types.VirtualMachinePowerStatePoweredOff}
}

// expectDelete expects vm to be powered off (when on) and destroyed once.
func (e *warmEnv) expectDelete(v inventory.VM) {
	if v.PowerState != types.VirtualMachinePowerStatePoweredOff {
		e.vs.EXPECT().ShutdownVirtualMachine(gomock.Any(), warmRefIs(v.Name)).Return(nil)
	}
	e.vs.EXPECT().DestroyVirtualMachine(gomock.Any(), warmRefIs(v.Name)).Return(nil)
}
