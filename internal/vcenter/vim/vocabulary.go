package vim

import (
	"context"
	"errors"
	"reflect"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// This file is the one place that translates between govmomi's types and
// the project's vCenter vocabulary (internal/vctypes): references, power
// states, pool runtimes, guest accounts and programs, a VM's properties
// and the change watch's reports, advanced settings (options, the
// ownership record), and faults.

// RefOf is r in the project's terms.
func RefOf(r types.ManagedObjectReference) vctypes.Ref {
	return vctypes.Ref{Type: r.Type, Value: r.Value}
}

// MORef is r as govmomi names it.
func MORef(r vctypes.Ref) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: r.Type, Value: r.Value}
}

// PowerStateOf is s in the project's terms.
func PowerStateOf(s types.VirtualMachinePowerState) vctypes.PowerState {
	return vctypes.PowerState(s)
}

// PoolRuntimeOf is rt's figures (nil for nil).
func PoolRuntimeOf(rt *types.ResourcePoolRuntimeInfo) *vctypes.PoolRuntime {
	if rt == nil {
		return nil
	}
	return &vctypes.PoolRuntime{
		CPUMaxMHz: rt.Cpu.MaxUsage, CPUUsageMHz: rt.Cpu.OverallUsage, CPUUnreservedMHz: rt.Cpu.UnreservedForVm,
		MemoryMaxBytes: rt.Memory.MaxUsage, MemoryUsageBytes: rt.Memory.OverallUsage, MemoryUnreservedBytes: rt.Memory.UnreservedForVm,
	}
}

// GuestAuthOf is a as the guest operations take it. A nil a is a nil
// account of the same type, as the hatchery passed it before the
// vocabulary existed.
func GuestAuthOf(a *vctypes.GuestAuth) types.BaseGuestAuthentication {
	if a == nil {
		return (*types.NamePasswordAuthentication)(nil)
	}
	return &types.NamePasswordAuthentication{Username: a.Username, Password: a.Password}
}

// GuestProgramSpec is p as the guest operations take it.
func GuestProgramSpec(p vctypes.GuestProgram) *types.GuestProgramSpec {
	return &types.GuestProgramSpec{ProgramPath: p.Path, Arguments: p.Args, EnvVariables: p.Env}
}

// FaultKindOf classifies the fault vCenter answered that err carries (a
// SOAP fault or a failed task's), by govmomi's fault.Is, never by text:
// vctypes.NoFault when err carries none (no answer, a timeout, ctx ended,
// or not a vCenter error), and the kind already attached when err was
// classified before (Classify).
func FaultKindOf(err error) vctypes.FaultKind {
	if err == nil {
		return vctypes.NoFault
	}
	if k := vctypes.KindOf(err); k != vctypes.NoFault {
		return k
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return vctypes.NoFault
	}
	var ir types.BaseInsufficientResourcesFault
	switch {
	case fault.Is(err, &types.NotAuthenticated{}):
		return vctypes.FaultNotAuthenticated
	// SystemErrorFault is the same fault under its SOAP detail name (the
	// simulator's injected "network failure" answers it).
	case fault.Is(err, &types.SystemError{}) || fault.Is(err, &types.SystemErrorFault{}):
		return vctypes.FaultSystemError
	case fault.Is(err, &types.ManagedObjectNotFound{}):
		return vctypes.FaultNotFound
	case fault.Is(err, &types.InvalidPowerState{}):
		return vctypes.FaultInvalidPowerState
	case fault.Is(err, &types.DuplicateName{}):
		return vctypes.FaultDuplicateName
	case fault.Is(err, &types.InvalidGuestLogin{}):
		return vctypes.FaultInvalidGuestLogin
	case fault.Is(err, &types.ConcurrentAccess{}):
		return vctypes.FaultConcurrentAccess
	case fault.Is(err, &types.NoDiskSpace{}):
		return vctypes.FaultNoDiskSpace
	case fault.Is(err, &types.NoPermission{}):
		return vctypes.FaultNoPermission
	case fault.Is(err, &types.MethodNotFound{}) || fault.Is(err, &types.NotImplemented{}) ||
		fault.Is(err, &types.GuestOperationsUnavailable{}) || fault.Is(err, &types.ToolsUnavailable{}):
		return vctypes.FaultNotSupported
	}
	var ns types.BaseNotSupported
	if _, ok := fault.As(err, &ns); ok {
		return vctypes.FaultNotSupported
	}
	// Faults that point at where the VM was to go (vctypes.PointsAtPlacement):
	// an inaccessible or not mounted datastore (InvalidDatastore and its
	// kinds), a host that does not answer (HostCommunication: not
	// connected, not reachable) or is in a state that takes no VM
	// (InvalidHostState: maintenance, disconnected).
	var ids types.BaseInvalidDatastore
	if _, ok := fault.As(err, &ids); ok {
		return vctypes.FaultDatastoreUnavailable
	}
	var hc types.BaseHostCommunication
	if _, ok := fault.As(err, &hc); ok {
		return vctypes.FaultHostUnavailable
	}
	var ihs types.BaseInvalidHostState
	if _, ok := fault.As(err, &ihs); ok {
		return vctypes.FaultHostUnavailable
	}
	if _, ok := fault.As(err, &ir); ok {
		return vctypes.FaultInsufficientResources
	}
	var f types.BaseMethodFault
	if _, ok := fault.As(err, &f); ok {
		return vctypes.FaultOther
	}
	return vctypes.NoFault
}

// Classify returns err with the kind of the vCenter fault it carries
// attached (a *vctypes.Fault around it, same text), so that the decision
// packages test it with errors.Is(err, vctypes.FaultX) or vctypes.KindOf.
// nil, an error carrying no fault and an error classified already are
// returned as they are.
func Classify(err error) error {
	if err == nil || vctypes.KindOf(err) != vctypes.NoFault {
		return err
	}
	k := FaultKindOf(err)
	if k == vctypes.NoFault {
		return err
	}
	return &vctypes.Fault{Kind: k, Err: err}
}

// EventOf is e in the project's terms: its type name (the Go type's, which
// is vCenter's event type: "VmPoweredOnEvent") and its creation time.
func EventOf(e types.BaseEvent) vctypes.Event {
	out := vctypes.Event{Type: reflect.TypeOf(e).Elem().Name()}
	if ev := e.GetEvent(); ev != nil {
		out.Key, out.Created = ev.Key, ev.CreatedTime
	}
	return out
}

// RefsOf is refs in the project's terms.
func RefsOf(refs []types.ManagedObjectReference) []vctypes.Ref { return each(refs, RefOf) }

// MORefs is refs as govmomi names them.
func MORefs(refs []vctypes.Ref) []types.ManagedObjectReference { return each(refs, MORef) }

// each is conv of every element of in, in order (an empty, non-nil slice
// for none): the one loop of the slice conversions above and below.
func each[T, U any](in []T, conv func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = conv(v)
	}
	return out
}

// OptionsOf is extra's string-valued settings in the project's terms (in
// order; a nil entry or a value of another type is left out).
func OptionsOf(extra []types.BaseOptionValue) []vctypes.Option {
	var out []vctypes.Option
	for _, o := range extra {
		if o == nil {
			continue
		}
		ov := o.GetOptionValue()
		if ov == nil {
			continue
		}
		if s, ok := ov.Value.(string); ok {
			out = append(out, vctypes.Option{Key: ov.Key, Value: s})
		}
	}
	return out
}

// OptionValues is opts as a config specification's ExtraConfig takes
// them (nil for none).
func OptionValues(opts []vctypes.Option) []types.BaseOptionValue {
	if len(opts) == 0 {
		return nil
	}
	out := make([]types.BaseOptionValue, len(opts))
	for i, o := range opts {
		out[i] = &types.OptionValue{Key: o.Key, Value: o.Value}
	}
	return out
}

// SetOptions returns extra with every option of opts set: an entry of the
// same key already there takes the new value (so that writing a setting
// twice leaves one), another is appended.
func SetOptions(extra []types.BaseOptionValue, opts []vctypes.Option) []types.BaseOptionValue {
next:
	for _, o := range opts {
		for _, e := range extra {
			if e == nil {
				continue
			}
			if ov := e.GetOptionValue(); ov != nil && ov.Key == o.Key {
				ov.Value = o.Value
				continue next
			}
		}
		extra = append(extra, &types.OptionValue{Key: o.Key, Value: o.Value})
	}
	return extra
}

// ApplyRecord writes r to a config specification: its Notes field
// (Annotation) and its options (SetOptions).
func ApplyRecord(spec *types.VirtualMachineConfigSpec, r vctypes.Record) {
	spec.Annotation = r.Notes
	spec.ExtraConfig = SetOptions(spec.ExtraConfig, r.Options)
}

// VMInfoOf is what the inventory reads of o (read with VMProperties) in
// the project's terms.
func VMInfoOf(o mo.VirtualMachine) vctypes.VMInfo {
	v := vctypes.VMInfo{Ref: RefOf(o.Reference()), Name: o.Name, PowerState: PowerStateOf(o.Runtime.PowerState)}
	if c := o.Config; c != nil {
		v.Template, v.Notes, v.Options = c.Template, c.Annotation, OptionsOf(c.ExtraConfig)
		v.NumCPU, v.MemoryMB, v.ChangeVersion = c.Hardware.NumCPU, c.Hardware.MemoryMB, c.ChangeVersion
	}
	if g := o.Guest; g != nil {
		v.IPAddress = g.IpAddress
		v.GuestOperationsReady = g.GuestOperationsReady != nil && *g.GuestOperationsReady
		for _, n := range g.Net {
			v.NetIPAddresses = append(v.NetIPAddresses, n.IpAddress...)
		}
	}
	return v
}

// VMInfosOf is VMInfoOf of each of objs.
func VMInfosOf(objs []mo.VirtualMachine) []vctypes.VMInfo { return each(objs, VMInfoOf) }

// VMUpdateOf is u in the project's terms: a removed property's value is
// nil, a power state a vctypes.PowerState, another value as reported.
func VMUpdateOf(u types.ObjectUpdate) vctypes.VMUpdate {
	out := vctypes.VMUpdate{Ref: RefOf(u.Obj), Kind: vctypes.UpdateKind(u.Kind)}
	for _, c := range u.ChangeSet {
		val := c.Val
		if c.Op == types.PropertyChangeOpRemove || c.Op == types.PropertyChangeOpIndirectRemove {
			val = nil
		}
		if ps, ok := val.(types.VirtualMachinePowerState); ok {
			val = PowerStateOf(ps)
		}
		out.Changes = append(out.Changes, vctypes.PropertyChange{Name: c.Name, Value: val})
	}
	return out
}

// InstantCloneSpecOf is req as InstantClone_Task takes it: the child's
// name, its folder, its options as ExtraConfig.
func InstantCloneSpecOf(req vctypes.InstantClone) types.VirtualMachineInstantCloneSpec {
	folder := MORef(req.Folder)
	return types.VirtualMachineInstantCloneSpec{
		Name:     req.Name,
		Location: types.VirtualMachineRelocateSpec{Folder: &folder},
		Config:   SetOptions(nil, req.Options),
	}
}

// ConfigSpecOf is c as a reconfigure's config specification, but for its
// growth (which needs the VM's devices: ApplyGrowth): the name, the
// change version, the Notes, then the record (ApplyRecord), then the
// options (SetOptions).
func ConfigSpecOf(c vctypes.ConfigChange) types.VirtualMachineConfigSpec {
	spec := types.VirtualMachineConfigSpec{Name: c.Name, ChangeVersion: c.ChangeVersion}
	if c.Notes != nil {
		spec.Annotation = *c.Notes
	}
	if c.Record != nil {
		ApplyRecord(&spec, *c.Record)
	}
	spec.ExtraConfig = SetOptions(spec.ExtraConfig, c.Options)
	return spec
}

// IsNotAuthenticated tells whether err is vCenter's NotAuthenticated fault
// (the session ended).
func IsNotAuthenticated(err error) bool {
	return err != nil && fault.Is(err, &types.NotAuthenticated{})
}

// IsNotFound tells whether err is ManagedObjectNotFound (the object is gone).
func IsNotFound(err error) bool {
	return err != nil && fault.Is(err, &types.ManagedObjectNotFound{})
}

// IsLoginRefused tells whether err is vCenter refusing the login for its
// credentials (the InvalidLogin fault: a wrong user or password, or an
// account locked or disabled), by the fault, never by its text.
func IsLoginRefused(err error) bool {
	return err != nil && fault.Is(err, &types.InvalidLogin{})
}

// IsStaleCollectorVersion tells whether err is InvalidCollectorVersion: a
// property collector asked for a data version it no longer knows.
func IsStaleCollectorVersion(err error) bool {
	return err != nil && fault.Is(err, &types.InvalidCollectorVersion{})
}

// IsRequestCanceled tells whether err is RequestCanceled: the request was
// cancelled on the server (a long poll by CancelWaitForUpdates).
func IsRequestCanceled(err error) bool {
	return err != nil && fault.Is(err, &types.RequestCanceled{})
}

// InvalidPowerStateOf returns the existing state of an InvalidPowerState
// fault err carries, and whether it carries one.
func InvalidPowerStateOf(err error) (types.VirtualMachinePowerState, bool) {
	var existing types.VirtualMachinePowerState
	found := false
	if err == nil {
		return existing, false // fault.In panics on nil
	}
	fault.In(err, func(f types.BaseMethodFault, _ string, _ []types.LocalizableMessage) bool {
		if ips, ok := f.(*types.InvalidPowerState); ok {
			existing, found = ips.ExistingState, true
			return true
		}
		return false
	})
	return existing, found
}
