package vcsimtest

import (
	"fmt"
	"net/netip"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// VMState is a snapshot of one VM's simulator state, read under its lock.
type VMState struct {
	Ref         types.ManagedObjectReference
	Name        string
	Template    bool
	Annotation  string
	ExtraConfig map[string]string
	NumCPU      int32
	MemoryMB    int32
	PowerState  types.VirtualMachinePowerState
	// IPAddress is guest.ipAddress; GuestNetIPs every guest.net[].ipAddress.
	IPAddress            string
	GuestNetIPs          []string
	GuestOperationsReady bool
	ToolsRunningStatus   string
}

// VMs returns the simulator's VMs and templates, each one whose creation
// is complete: read their fields under their own lock
// (SimContext().WithLock). The simulator registers a VM it creates (clone,
// create) in its folder before it has written the VM's fields, and writes
// them holding the folder's lock (the creating task's), not the VM's;
// taking and releasing each parent folder's lock waits for those tasks.
// The folder's lock is never held with a VM's: a destroy holds the VM's
// lock and then takes its folder's.
func (e *Env) VMs() []*simulator.VirtualMachine {
	sctx := e.SimContext()
	var vms []*simulator.VirtualMachine
	for _, o := range e.Model.Map().All("VirtualMachine") {
		if vm, ok := o.(*simulator.VirtualMachine); ok {
			vms = append(vms, vm)
		}
	}
	waited := map[types.ManagedObjectReference]bool{}
	for _, vm := range vms {
		if p := vm.Parent; p != nil && !waited[*p] { // set before the VM was registered
			waited[*p] = true
			sctx.WithLock(*p, func() {})
		}
	}
	return vms
}

// Inspect returns the state of the VM or template named name (its current
// name: vcsim keeps the old config.name after a rename).
func (e *Env) Inspect(name string) (VMState, bool) {
	sctx := e.SimContext()
	for _, vm := range e.VMs() {
		var st VMState
		match := false
		sctx.WithLock(vm, func() {
			if vm.Name != name {
				return
			}
			match = true
			st = snapshot(vm)
		})
		if match {
			return st, true
		}
	}
	return VMState{}, false
}

// MustInspect is Inspect failing the test when the VM does not exist.
func (e *Env) MustInspect(name string) VMState {
	e.t.Helper()
	st, ok := e.Inspect(name)
	if !ok {
		e.t.Fatalf("vm %q not found in the simulator", name)
	}
	return st
}

func snapshot(vm *simulator.VirtualMachine) VMState {
	st := VMState{Ref: vm.Self, Name: vm.Name, PowerState: vm.Runtime.PowerState, ExtraConfig: map[string]string{}}
	if c := vm.Config; c != nil {
		st.Template = c.Template
		st.Annotation = c.Annotation
		st.NumCPU = c.Hardware.NumCPU
		st.MemoryMB = c.Hardware.MemoryMB
		for _, o := range c.ExtraConfig {
			if ov := o.GetOptionValue(); ov != nil {
				st.ExtraConfig[ov.Key] = fmt.Sprint(ov.Value)
			}
		}
	}
	if g := vm.Guest; g != nil {
		st.IPAddress = g.IpAddress
		for _, n := range g.Net {
			st.GuestNetIPs = append(st.GuestNetIPs, n.IpAddress...)
		}
		st.GuestOperationsReady = g.GuestOperationsReady != nil && *g.GuestOperationsReady
		st.ToolsRunningStatus = g.ToolsRunningStatus
	}
	return st
}

// resourcePool returns the simulator object of ResourcePoolPath (the
// root pool of the model's cluster DC0_C0, not of Options.Placements'
// clusters).
func (e *Env) resourcePool() *simulator.ResourcePool {
	e.t.Helper()
	m := e.Model.Map()
	var cl *simulator.ClusterComputeResource
	for _, o := range m.All("ClusterComputeResource") {
		if c, ok := o.(*simulator.ClusterComputeResource); ok && c.Name == defaultClusterName {
			cl = c
		}
	}
	if cl == nil || cl.ResourcePool == nil {
		e.t.Fatalf("simulator has no cluster resource pool")
		return nil
	}
	return m.Get(*cl.ResourcePool).(*simulator.ResourcePool)
}

// defaultClusterName is the cluster of ResourcePoolPath.
const defaultClusterName = "DC0_C0"

// ResourcePoolRef is the reference of ResourcePoolPath.
func (e *Env) ResourcePoolRef() types.ManagedObjectReference { return e.resourcePool().Self }

// SetResourcePoolRuntime edits the runtime of ResourcePoolPath under the
// pool's lock; the change is visible over the API at once. Example:
//
//	env.SetResourcePoolRuntime(func(rt *types.ResourcePoolRuntimeInfo) {
//		rt.Memory.UnreservedForVm = 8 << 30
//	})
func (e *Env) SetResourcePoolRuntime(edit func(*types.ResourcePoolRuntimeInfo)) {
	pool := e.resourcePool()
	sctx := e.SimContext()
	sctx.WithLock(pool, func() {
		rt := pool.Runtime
		edit(&rt)
		sctx.Update(pool, []types.PropertyChange{{Name: "runtime", Val: rt}})
	})
}

// TerminateSession ends c's vCenter session from another session, as an
// operator or an idle timeout would: c's next authenticated call gets
// NotAuthenticated.
func (e *Env) TerminateSession(c *vcenter.Client) {
	e.t.Helper()
	ctx := e.ctx
	us, err := session.NewManager(c.Vim25()).UserSession(ctx)
	if err != nil || us == nil {
		e.t.Fatalf("read client session: %v", err)
	}
	if err := e.Admin.SessionManager.TerminateSession(ctx, []string{us.Key}); err != nil {
		e.t.Fatalf("terminate session: %v", err)
	}
}

// ForeignVM describes VMs AddForeignVMs puts in the datacenter.
type ForeignVM struct {
	Name       string
	Annotation string
	PoweredOn  bool
	NumCPU     int32
	MemoryMB   int32
	IP         string
}

// AddForeignVMs registers n powered-on VMs named prefix00000… directly in
// the simulator's registry (no API call, no files): ~5,000 in well under a
// second, where CreateVM costs ~38 ms each. Each has 1 vCPU, 1024 MB and a
// guest IP from 10.200.0.0/16. Limit: these VMs are for listing and reads
// (benchmarks, inventory tests); they are not in their pool's or host's VM
// list and have no files, so do not power, clone or destroy them.
func (e *Env) AddForeignVMs(prefix string, n int) []types.ManagedObjectReference {
	e.t.Helper()
	return e.AddForeignVMsIn("", prefix, n)
}

// AddForeignVMsIn is AddForeignVMs in the folder at path (an inventory
// path below the VM folder, created when missing; "" is the VM folder),
// as other teams' VMs in their own folders of a shared vCenter.
func (e *Env) AddForeignVMsIn(path, prefix string, n int) []types.ManagedObjectReference {
	e.t.Helper()
	e.fastMu.Lock()
	start := e.fastN
	e.fastN += n
	e.fastMu.Unlock()
	vms := make([]ForeignVM, n)
	base := netip.MustParseAddr("10.200.0.1").As4()
	for i := range vms {
		k := start + i
		ip := base
		k++ // 10.200.0.1 first
		ip[2], ip[3] = byte(k>>8), byte(k)
		vms[i] = ForeignVM{
			Name:      fmt.Sprintf("%s%05d", prefix, start+i),
			PoweredOn: true,
			NumCPU:    1,
			MemoryMB:  1024,
			IP:        netip.AddrFrom4(ip).String(),
		}
	}
	return e.AddVMsIn(path, vms)
}

// AddVMs registers VMs directly in the simulator's registry (see
// AddForeignVMs for the speed and the limits), in the datacenter's VM
// folder.
func (e *Env) AddVMs(vms []ForeignVM) []types.ManagedObjectReference {
	e.t.Helper()
	return e.AddVMsIn("", vms)
}

// AddVMsIn is AddVMs in the folder at path (an inventory path below the
// VM folder, created when missing); "" is the VM folder.
func (e *Env) AddVMsIn(path string, vms []ForeignVM) []types.ManagedObjectReference {
	e.t.Helper()
	m := e.Model.Map()
	sctx := e.SimContext()
	dc, ok := m.Any("Datacenter").(*simulator.Datacenter)
	if !ok {
		e.t.Fatalf("simulator has no datacenter")
	}
	folderRef := dc.VmFolder
	if path != "" {
		f, err := e.ensureFolder(e.ctx, path)
		if err != nil {
			e.t.Fatalf("folder %q: %v", path, err)
		}
		folderRef = f.Reference()
	}
	folder := m.Get(folderRef).(*simulator.Folder)
	pool := e.resourcePool()
	cl := m.Any("ClusterComputeResource").(*simulator.ClusterComputeResource)
	var host *types.ManagedObjectReference
	if len(cl.Host) > 0 {
		host = &cl.Host[0]
	}

	objs := make([]*simulator.VirtualMachine, len(vms))
	refs := make([]types.ManagedObjectReference, len(vms))
	for i, f := range vms {
		vm := &simulator.VirtualMachine{}
		vm.Name = f.Name
		state := types.VirtualMachinePowerStatePoweredOff
		if f.PoweredOn {
			state = types.VirtualMachinePowerStatePoweredOn
		}
		vm.Config = &types.VirtualMachineConfigInfo{
			Name:       f.Name,
			GuestId:    "otherLinux64Guest",
			Annotation: f.Annotation,
			Hardware:   types.VirtualHardware{NumCPU: f.NumCPU, MemoryMB: f.MemoryMB},
			// vCenter gives every VM a changeVersion (changeversion.go).
			ChangeVersion: "vcsimtest-fixture-" + f.Name,
		}
		vm.Runtime = types.VirtualMachineRuntimeInfo{
			PowerState:      state,
			ConnectionState: types.VirtualMachineConnectionStateConnected,
			Host:            host,
		}
		vm.Summary.Runtime = vm.Runtime
		vm.Summary.Config = types.VirtualMachineConfigSummary{Name: f.Name, NumCpu: f.NumCPU, MemorySizeMB: f.MemoryMB}
		vm.Guest = &types.GuestInfo{IpAddress: f.IP, GuestOperationsReady: types.NewBool(false)}
		if f.IP != "" {
			vm.Guest.Net = []types.GuestNicInfo{{Network: e.Network, IpAddress: []string{f.IP}, Connected: true}}
		}
		vm.Summary.Guest = &types.VirtualMachineGuestSummary{IpAddress: f.IP}
		vm.ResourcePool = &pool.Self
		m.NewEntity(vm)
		vm.Summary.Vm = &vm.Self
		objs[i] = vm
		refs[i] = vm.Self
	}
	// The folder lists its children before they are put: a ContainerView
	// picks a new object up only when the folder already holds it.
	sctx.WithLock(folder, func() {
		children := append(append([]types.ManagedObjectReference(nil), folder.ChildEntity...), refs...)
		sctx.Update(folder, []types.PropertyChange{{Name: "childEntity", Val: children}})
	})
	for _, vm := range objs {
		m.PutEntity(folder, vm)
	}
	return refs
}

// Ready reports whether the Env's context is still live (the test runs).
func (e *Env) Ready() bool { return e.ctx.Err() == nil }
