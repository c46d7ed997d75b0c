package vcsimtest

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"
)

// instantClone extends the simulator with VirtualMachine.InstantClone_Task
// (vSphere 6.7 and later), which vcsim v0.56.0 does not implement (it
// answers MethodNotFound). It models vCenter's documented behaviour:
//
//   - the source must be powered on: any other power state fails the task
//     with InvalidPowerState (requested poweredOn, existing the source's);
//   - the child is named spec.name, in spec.location's folder (default: the
//     datacenter's root VM folder, as the API reference says "the root VM
//     folder of the source VM"), resource pool (default: the source's) and
//     datastore (default: the source's); a name already taken in that
//     folder fails the task with DuplicateName;
//   - the child runs on the source's host (it shares the source's memory)
//     with the source's hardware (CPUs, cores, memory, devices), its
//     configuration otherwise copied from the source's (guest id, version,
//     annotation and ExtraConfig: a fork of a running VM), a new MAC on each
//     network card, and spec.config's option values set on top of the
//     copied ExtraConfig (an empty value removes the key); biosUuid, when
//     set, is its BIOS UUID; spec.location.deviceChange may only edit
//     network cards (anything else fails with InvalidArgument);
//   - the child exists powered on when the task ends: it is never powered
//     on by a power-on task (no VmStartingEvent), it is created running;
//   - the task's entity is the source, its result the child's reference.
//
// The child's guest is the source's memory: it does not boot, it
// re-identifies. The readiness handler (readiness.go) plays that: the child
// reports tools running and guest operations ready after the
// re-identification delay (Options.InstantReadyDelay), and only then takes
// the address its own guestinfo gives (FakeCloudInit, cloudinit.go): the
// metadata's static address, else a fresh DHCP lease. Until then it
// reports no address: never the source's.
//
// The task is named InstantClone (simulator.TaskDelay's key, which
// ApplyTaskDelays sets from the latency model). The hook is always on:
// without it the simulator has no such method at all.
type instantClone struct {
	env  *Env
	next atomic.Int64
}

// handle is a method hook (installHooks): it answers InstantClone_Task on
// a virtual machine and lets every other call through (nil, nil).
func (ic *instantClone) handle(ctx *simulator.Context, method *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if method.Name != "InstantClone_Task" {
		return nil, nil
	}
	if _, ok := method.Body.(*types.InstantClone_Task); !ok {
		return nil, nil
	}
	src, ok := ctx.Map.Get(method.This).(*simulator.VirtualMachine)
	if !ok {
		return nil, nil // MethodNotFound on anything but a VM, as before
	}
	h := &instantCloneHandler{
		Self: types.ManagedObjectReference{Type: "VcsimtestInstantClone", Value: fmt.Sprintf("instant-clone-%d", ic.next.Add(1))},
		env:  ic.env,
		src:  src,
	}
	// As clonePowerOn does: a reference no registry knows leaves the
	// handler ours.
	method.This = h.Self
	return h, nil
}

// instantCloneHandler answers one InstantClone_Task. It opts out of the
// dispatch's locking (sync.Locker): the task locks the source itself.
type instantCloneHandler struct {
	Self types.ManagedObjectReference
	env  *Env
	src  *simulator.VirtualMachine
}

// Reference implements mo.Reference.
func (h *instantCloneHandler) Reference() types.ManagedObjectReference { return h.Self }

// Lock implements sync.Locker: nothing to lock (see the type).
func (h *instantCloneHandler) Lock() {}

// Unlock implements sync.Locker.
func (h *instantCloneHandler) Unlock() {}

// InstantCloneTask starts the task (see instantClone); every fault is the
// task's, as vCenter reports them.
func (h *instantCloneHandler) InstantCloneTask(ctx *simulator.Context, req *types.InstantClone_Task) soap.HasFault {
	spec := req.Spec
	// The task holds the source's lock while it runs (Task.Run), so the
	// source's state is read consistently.
	task := simulator.CreateTask(h.src, "instantClone", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return h.fork(ctx, spec)
	})
	return &methods.InstantClone_TaskBody{Res: &types.InstantClone_TaskResponse{Returnval: task.Run(ctx)}}
}

// fork creates the child and sets it running; the caller (the task) holds
// the source's lock on behalf of ctx.
func (h *instantCloneHandler) fork(ctx *simulator.Context, spec types.VirtualMachineInstantCloneSpec) (types.AnyType, types.BaseMethodFault) {
	src := h.src
	if st := src.Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOn {
		return nil, &types.InvalidPowerState{RequestedState: types.VirtualMachinePowerStatePoweredOn, ExistingState: st}
	}
	if spec.Name == "" {
		return nil, &types.InvalidArgument{InvalidProperty: "spec.name"}
	}
	folderRef := rootVMFolder(ctx, src)
	if spec.Location.Folder != nil {
		folderRef = spec.Location.Folder
	}
	var folder *simulator.Folder
	if folderRef != nil {
		folder, _ = ctx.Map.Get(*folderRef).(*simulator.Folder)
	}
	if folder == nil {
		return nil, &types.InvalidArgument{InvalidProperty: "spec.location.folder"}
	}
	pool := src.ResourcePool
	if spec.Location.Pool != nil {
		pool = spec.Location.Pool
	}
	if pool == nil {
		return nil, &types.InvalidArgument{InvalidProperty: "spec.location.pool"}
	}
	var vmx object.DatastorePath
	vmx.FromString(src.Config.Files.VmPathName)
	vmx.Path = spec.Name
	if ref := spec.Location.Datastore; ref != nil {
		ds, ok := ctx.Map.Get(*ref).(*simulator.Datastore)
		if !ok {
			return nil, &types.InvalidArgument{InvalidProperty: "spec.location.datastore"}
		}
		vmx.Datastore = ds.Name
	}
	// The folder's children are read under its lock (the simulator's own
	// clone reads them without, see serialtasks.go), passing over a child
	// another instant clone has registered and not yet named: instant
	// clones run beside each other (cloneBodies, clonebodies.go).
	var taken mo.Reference
	ctx.WithLock(folder, func() {
		if e := childNamed(ctx, folder, spec.Name); e != nil {
			taken = e
		}
	})
	if taken != nil {
		return nil, &types.DuplicateName{Name: spec.Name, Object: taken.Reference()}
	}

	devices, fault := childDevices(src, spec.Location.DeviceChange)
	if fault != nil {
		return nil, fault
	}
	config := types.VirtualMachineConfigSpec{
		Name:                spec.Name,
		Version:             src.Config.Version,
		GuestId:             src.Config.GuestId,
		Annotation:          src.Config.Annotation,
		Files:               &types.VirtualMachineFileInfo{VmPathName: vmx.String()},
		NumCPUs:             src.Config.Hardware.NumCPU,
		MemoryMB:            int64(src.Config.Hardware.MemoryMB),
		NumCoresPerSocket:   src.Config.Hardware.NumCoresPerSocket,
		VirtualICH7MPresent: src.Config.Hardware.VirtualICH7MPresent,
		VirtualSMCPresent:   src.Config.Hardware.VirtualSMCPresent,
		ExtraConfig:         mergeExtraConfig(src.Config.ExtraConfig, spec.Config),
		Uuid:                spec.BiosUuid,
		DeviceChange:        devices,
	}
	created, ok := folder.CreateVMTask(ctx, &types.CreateVM_Task{
		This:   folder.Self,
		Config: config,
		Pool:   *pool,
		Host:   src.Runtime.Host, // the source's host: the child shares its memory
	}).(*methods.CreateVM_TaskBody)
	if !ok || created.Res == nil {
		return nil, &types.RuntimeFault{}
	}
	ctask, ok := ctx.Map.Get(created.Res.Returnval).(*simulator.Task)
	if !ok {
		return nil, &types.RuntimeFault{}
	}
	ctask.Wait()
	if ctask.Info.Error != nil {
		return nil, ctask.Info.Error.Fault
	}
	ref, ok := ctask.Info.Result.(types.ManagedObjectReference)
	if !ok {
		return nil, &types.RuntimeFault{}
	}
	child, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
	if !ok {
		return nil, &types.ManagedObjectNotFound{Obj: ref}
	}
	h.env.ready.markInstant(ref)
	ctx.WithLock(child, func() { setRunning(ctx, child) })
	return ref, nil
}

// setRunning makes the child powered on as a fork is: no power-on task,
// its network cards connected as their startConnected says; the readiness
// handler sees the change (runtime.powerState) and plays the guest's
// re-identification. The caller holds child's lock.
func setRunning(ctx *simulator.Context, child *simulator.VirtualMachine) {
	// A copy: readers of the simulator's device list may hold it.
	devices := copyDevices(child.Config.Hardware.Device)
	for _, d := range devices {
		if c := d.GetVirtualDevice().Connectable; c != nil {
			c.Connected = c.StartConnected
		}
	}
	ctx.Update(child, []types.PropertyChange{
		{Name: "runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOn},
		{Name: "summary.runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOn},
		{Name: "summary.runtime.bootTime", Val: time.Now()},
		{Name: "config.hardware.device", Val: devices},
	})
}

// rootVMFolder is the VM folder of src's datacenter (nil when src is not
// under one). The caller holds src's lock; parents are read without
// theirs: an entity's parent reference is set before it is registered.
func rootVMFolder(ctx *simulator.Context, src *simulator.VirtualMachine) *types.ManagedObjectReference {
	p := src.Parent
	for p != nil {
		obj := ctx.Map.Get(*p)
		if dc, ok := obj.(*simulator.Datacenter); ok {
			f := dc.VmFolder
			return &f
		}
		e, ok := obj.(mo.Entity)
		if !ok {
			return nil
		}
		p = e.Entity().Parent
	}
	return nil
}

// childDevices are the source's devices to add to the child: a copy of
// each but the default ones the simulator adds to every VM, each disk a
// new file (the simulator models no delta disk), each network card
// without its MAC (a new one is generated), and the network cards edited
// as changes says. Any other change is refused: vCenter accepts only
// edits of network cards (and file-backed serial and parallel ports,
// which this model has none of).
func childDevices(src *simulator.VirtualMachine, changes []types.BaseVirtualDeviceConfigSpec) ([]types.BaseVirtualDeviceConfigSpec, types.BaseMethodFault) {
	devices := copyDevices(src.Config.Hardware.Device)
	var edits []types.BaseVirtualDevice
	for _, c := range changes {
		s := c.GetVirtualDeviceConfigSpec()
		if s.Operation != types.VirtualDeviceConfigSpecOperationEdit || s.FileOperation != "" {
			return nil, &types.InvalidArgument{InvalidProperty: "spec.location.deviceChange"}
		}
		if _, ok := s.Device.(types.BaseVirtualEthernetCard); !ok {
			return nil, &types.InvalidArgument{InvalidProperty: "spec.location.deviceChange"}
		}
		edits = append(edits, s.Device)
	}
	edits = copyDevices(edits)
	for _, e := range edits {
		key := e.GetVirtualDevice().Key
		found := false
		for i, d := range devices {
			if d.GetVirtualDevice().Key == key {
				devices[i] = e
				found = true
			}
		}
		if !found {
			return nil, &types.InvalidArgument{InvalidProperty: "spec.location.deviceChange"}
		}
	}

	defaults := object.VirtualDeviceList(esx.VirtualDevice)
	list := object.VirtualDeviceList(devices)
	var out []types.BaseVirtualDeviceConfigSpec
	for _, d := range devices {
		if defaults.Find(list.Name(d)) != nil {
			continue // created with every VM
		}
		var fop types.VirtualDeviceConfigSpecFileOperation
		switch dev := d.(type) {
		case *types.VirtualDisk:
			fop = types.VirtualDeviceConfigSpecFileOperationCreate
			if b, ok := dev.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
				b.FileName, b.Parent, b.Uuid = "", nil, ""
			}
		case types.BaseVirtualEthernetCard:
			card := dev.GetVirtualEthernetCard()
			card.MacAddress = ""
			card.AddressType = string(types.VirtualEthernetCardMacTypeGenerated)
		}
		out = append(out, &types.VirtualDeviceConfigSpec{
			Operation:     types.VirtualDeviceConfigSpecOperationAdd,
			Device:        d,
			FileOperation: fop,
		})
	}
	return out, nil
}

// copyDevices deep-copies devices through the SOAP encoding (which keeps
// each device's type), so that the child never shares a device with the
// source.
func copyDevices(devices []types.BaseVirtualDevice) []types.BaseVirtualDevice {
	if len(devices) == 0 {
		return nil
	}
	b, err := xml.Marshal(types.ArrayOfVirtualDevice{VirtualDevice: devices})
	if err != nil {
		panic(fmt.Sprintf("vcsimtest: encode devices: %v", err))
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.TypeFunc = types.TypeFunc()
	var out types.ArrayOfVirtualDevice
	if err := dec.Decode(&out); err != nil {
		panic(fmt.Sprintf("vcsimtest: decode devices: %v", err))
	}
	return out.VirtualDevice
}

// mergeExtraConfig is the source's ExtraConfig with set applied: a key of
// set replaces the source's value, an empty value removes the key (as a
// reconfigure does on vCenter). The source's list is not changed.
func mergeExtraConfig(source, set []types.BaseOptionValue) []types.BaseOptionValue {
	var out []types.BaseOptionValue
	index := map[string]int{}
	put := func(o types.BaseOptionValue) {
		ov := o.GetOptionValue()
		if ov == nil {
			return
		}
		v := &types.OptionValue{Key: ov.Key, Value: ov.Value}
		if i, ok := index[ov.Key]; ok {
			out[i] = v
			return
		}
		index[ov.Key] = len(out)
		out = append(out, v)
	}
	for _, o := range source {
		put(o)
	}
	for _, o := range set {
		put(o)
	}
	kept := out[:0:0]
	for _, o := range out {
		if s, ok := o.GetOptionValue().Value.(string); ok && s == "" {
			continue
		}
		kept = append(kept, o)
	}
	return kept
}
