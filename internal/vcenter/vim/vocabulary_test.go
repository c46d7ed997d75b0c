package vim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// taskFault is a failed task's error carrying f, as the client returns it.
func taskFault(f types.BaseMethodFault) error {
	return task.Error{LocalizedMethodFault: &types.LocalizedMethodFault{Fault: f, LocalizedMessage: "task failed"}}
}

// TestFaultKindOf: each govmomi fault the hatchery tells apart maps on its
// one kind, as a task's fault and as a SOAP fault, wrapped or not; a
// timeout or no answer is no fault. Fails if a kind is mapped twice or a
// fault is classified by another rule than this one.
func TestFaultKindOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fault types.BaseMethodFault
		want  vctypes.FaultKind
	}{
		{&types.NotAuthenticated{}, vctypes.FaultNotAuthenticated},
		{&types.SystemError{Reason: "x"}, vctypes.FaultSystemError},
		{&types.SystemErrorFault{}, vctypes.FaultSystemError},
		{&types.ManagedObjectNotFound{}, vctypes.FaultNotFound},
		{&types.InvalidPowerState{}, vctypes.FaultInvalidPowerState},
		{&types.DuplicateName{}, vctypes.FaultDuplicateName},
		{&types.InvalidGuestLogin{}, vctypes.FaultInvalidGuestLogin},
		{&types.InsufficientMemoryResourcesFault{}, vctypes.FaultInsufficientResources},
		{&types.InsufficientResourcesFault{}, vctypes.FaultInsufficientResources},
		{&types.ConcurrentAccess{}, vctypes.FaultConcurrentAccess},
		{&types.NoDiskSpace{Datastore: "ds1"}, vctypes.FaultNoDiskSpace},
		{&types.InaccessibleDatastore{}, vctypes.FaultDatastoreUnavailable},
		{&types.DatastoreNotWritableOnHost{}, vctypes.FaultDatastoreUnavailable},
		{&types.HostNotConnected{}, vctypes.FaultHostUnavailable},
		{&types.HostNotReachable{}, vctypes.FaultHostUnavailable},
		{&types.InvalidHostState{}, vctypes.FaultHostUnavailable},
		{&types.NotSupported{}, vctypes.FaultNotSupported},
		{&types.MethodNotFound{Method: "InstantClone_Task"}, vctypes.FaultNotSupported},
		{&types.NotImplemented{}, vctypes.FaultNotSupported},
		{&types.GuestOperationsUnavailable{}, vctypes.FaultNotSupported},
		{&types.ToolsUnavailable{}, vctypes.FaultNotSupported},
		{&types.NoPermission{PrivilegeId: "VirtualMachine.Interact.PowerOn"}, vctypes.FaultNoPermission},
		{&types.FileNotFound{}, vctypes.FaultOther},
	}
	seen := map[vctypes.FaultKind]bool{}
	for _, tc := range cases {
		name := fmt.Sprintf("%T", tc.fault)
		seen[tc.want] = true
		for _, err := range []error{
			taskFault(tc.fault),
			fmt.Errorf("clone %q: %w", "vm", taskFault(tc.fault)),
			soap.WrapSoapFault(&soap.Fault{Code: "ServerFaultCode", String: "x", Detail: struct {
				Fault types.AnyType `xml:",any,typeattr"`
			}{Fault: tc.fault}}),
		} {
			assert.Equal(t, tc.want, FaultKindOf(err), name)
			c := Classify(err)
			assert.Equal(t, tc.want, vctypes.KindOf(c), name)
			assert.True(t, errors.Is(c, tc.want), "%s: errors.Is the kind", name)
			assert.Equal(t, err.Error(), c.Error(), "%s: the text is kept", name)
			assert.Same(t, c, Classify(c), "%s: classified once", name)
		}
	}
	for _, k := range vctypes.FaultKinds {
		assert.True(t, seen[k], "kind %v is produced by FaultKindOf", k)
	}
	refused := &url.Error{Op: "Post", URL: "https://vc/sdk", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, err := range []error{nil, refused, context.DeadlineExceeded, fmt.Errorf("wait: %w", context.Canceled), errors.New("other"), vctypes.ErrNotConnected} {
		assert.Equal(t, vctypes.NoFault, FaultKindOf(err), "%v", err)
		assert.Equal(t, err, Classify(err), "%v: unchanged", err)
	}
	assert.False(t, errors.Is(Classify(taskFault(&types.DuplicateName{})), vctypes.FaultNotFound), "another kind does not match")
}

// TestConversions: a reference, a pool runtime and a guest program make
// the round trip with every field.
func TestConversions(t *testing.T) {
	t.Parallel()
	mor := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-42"}
	assert.Equal(t, mor, MORef(RefOf(mor)))
	rt := &types.ResourcePoolRuntimeInfo{
		Cpu:    types.ResourcePoolResourceUsage{MaxUsage: 1, OverallUsage: 2, UnreservedForVm: 3},
		Memory: types.ResourcePoolResourceUsage{MaxUsage: 4, OverallUsage: 5, UnreservedForVm: 6},
	}
	assert.Equal(t, &vctypes.PoolRuntime{CPUMaxMHz: 1, CPUUsageMHz: 2, CPUUnreservedMHz: 3, MemoryMaxBytes: 4, MemoryUsageBytes: 5, MemoryUnreservedBytes: 6}, PoolRuntimeOf(rt))
	assert.Nil(t, PoolRuntimeOf(nil))
	assert.Equal(t, &types.GuestProgramSpec{ProgramPath: "/bin/echo", Arguments: "-n ;x", EnvVariables: []string{"A=b"}},
		GuestProgramSpec(vctypes.GuestProgram{Path: "/bin/echo", Args: "-n ;x", Env: []string{"A=b"}}))
	auth, ok := GuestAuthOf(&vctypes.GuestAuth{Username: "u", Password: "p"}).(*types.NamePasswordAuthentication)
	require.True(t, ok)
	assert.Equal(t, types.NamePasswordAuthentication{Username: "u", Password: "p"}, *auth)
	assert.Equal(t, types.VirtualMachinePowerStateSuspended, types.VirtualMachinePowerState(PowerStateOf(types.VirtualMachinePowerStateSuspended)))
	assert.Equal(t, vctypes.Suspended, PowerStateOf(types.VirtualMachinePowerStateSuspended))

	// An event: vCenter's type name, its key and creation time.
	at := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	on := &types.VmPoweredOnEvent{VmEvent: types.VmEvent{Event: types.Event{Key: 17, CreatedTime: at}}}
	assert.Equal(t, vctypes.Event{Type: "VmPoweredOnEvent", Key: 17, Created: at}, EventOf(on))
	cloned := &types.VmClonedEvent{VmCloneEvent: types.VmCloneEvent{VmEvent: types.VmEvent{Event: types.Event{Key: 3}}}}
	assert.Equal(t, vctypes.Event{Type: "VmClonedEvent", Key: 3}, EventOf(cloned))
}

// TestRequestConversions: the options, the record, a reconfigure's and an
// instant clone's request as govmomi's specifications take them, and a
// listed VM and a change watch's report in the project's terms.
func TestRequestConversions(t *testing.T) {
	t.Parallel()
	mirror := vctypes.Option{Key: "cds.hatchery.annotation", Value: "{new}"}
	extra := []types.BaseOptionValue{nil, &types.OptionValue{Key: mirror.Key, Value: "{old}"}, &types.OptionValue{Key: "n", Value: int32(3)}}
	extra = SetOptions(extra, []vctypes.Option{mirror, {Key: "guestinfo.x", Value: "y"}})
	assert.Equal(t, []vctypes.Option{mirror, {Key: "guestinfo.x", Value: "y"}}, OptionsOf(extra),
		"a key already there takes the new value, another is appended; only string values are read")
	assert.Len(t, extra, 4)

	var spec types.VirtualMachineConfigSpec
	ApplyRecord(&spec, vctypes.Record{Notes: "{new}", Options: []vctypes.Option{mirror}})
	ApplyRecord(&spec, vctypes.Record{Notes: "{new}", Options: []vctypes.Option{mirror}})
	assert.Equal(t, "{new}", spec.Annotation)
	assert.Equal(t, []vctypes.Option{mirror}, OptionsOf(spec.ExtraConfig), "written twice: one mirror")

	notes := "parent"
	cs := ConfigSpecOf(vctypes.ConfigChange{Name: "w-2", ChangeVersion: "cv", Notes: &notes, Options: []vctypes.Option{{Key: "guestinfo.userdata"}}})
	assert.Equal(t, "w-2", cs.Name)
	assert.Equal(t, "cv", cs.ChangeVersion)
	assert.Equal(t, "parent", cs.Annotation)
	assert.Equal(t, []vctypes.Option{{Key: "guestinfo.userdata"}}, OptionsOf(cs.ExtraConfig), "an empty value, which removes the key")
	assert.Empty(t, ConfigSpecOf(vctypes.ConfigChange{}).Annotation, "nil Notes: not written")
	// The record (Notes and mirror) after the Notes, the options after the
	// record's; no hardware: the growth needs the VM's devices.
	cs = ConfigSpecOf(vctypes.ConfigChange{Notes: &notes, Record: &vctypes.Record{Notes: "{rec}", Options: []vctypes.Option{mirror}},
		Options: []vctypes.Option{{Key: "guestinfo.x", Value: "y"}}, Growth: &vctypes.Growth{CPUs: 4, MemoryMB: 8192}})
	assert.Equal(t, "{rec}", cs.Annotation)
	assert.Equal(t, []vctypes.Option{mirror, {Key: "guestinfo.x", Value: "y"}}, OptionsOf(cs.ExtraConfig))
	assert.Zero(t, cs.NumCPUs)
	assert.Empty(t, cs.DeviceChange)

	folder := vctypes.Ref{Type: "Folder", Value: "group-v3"}
	ic := InstantCloneSpecOf(vctypes.InstantClone{Name: "child", Folder: folder, Options: []vctypes.Option{mirror}})
	assert.Equal(t, "child", ic.Name)
	require.NotNil(t, ic.Location.Folder)
	assert.Equal(t, MORef(folder), *ic.Location.Folder)
	assert.Nil(t, ic.Location.Pool, "the parent's pool")
	assert.Equal(t, []vctypes.Option{mirror}, OptionsOf(ic.Config))

	ready := true
	var o mo.VirtualMachine
	o.Self, o.Name = types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}, "w-1"
	o.Runtime.PowerState = types.VirtualMachinePowerStateSuspended
	o.Config = &types.VirtualMachineConfigInfo{Template: true, Annotation: "notes", ChangeVersion: "cv1",
		ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: mirror.Key, Value: mirror.Value}},
		Hardware:    types.VirtualHardware{NumCPU: 2, MemoryMB: 2048}}
	o.Guest = &types.GuestInfo{IpAddress: "10.0.0.5", GuestOperationsReady: &ready,
		Net: []types.GuestNicInfo{{IpAddress: []string{"10.0.0.5", "fe80::1"}}}}
	assert.Equal(t, vctypes.VMInfo{
		Ref: vctypes.Ref{Type: "VirtualMachine", Value: "vm-1"}, Name: "w-1", Template: true, Notes: "notes",
		Options: []vctypes.Option{mirror}, NumCPU: 2, MemoryMB: 2048, PowerState: vctypes.Suspended, ChangeVersion: "cv1",
		IPAddress: "10.0.0.5", NetIPAddresses: []string{"10.0.0.5", "fe80::1"}, GuestOperationsReady: true,
	}, VMInfoOf(o))
	assert.Equal(t, vctypes.VMInfo{Ref: vctypes.Ref{Type: "VirtualMachine", Value: "vm-2"}}, VMInfoOf(mo.VirtualMachine{
		ManagedEntity: mo.ManagedEntity{ExtensibleManagedObject: mo.ExtensibleManagedObject{Self: types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-2"}}}}),
		"no config, no guest: zero values")

	u := VMUpdateOf(types.ObjectUpdate{Obj: o.Self, Kind: types.ObjectUpdateKindModify, ChangeSet: []types.PropertyChange{
		{Name: "runtime.powerState", Op: types.PropertyChangeOpAssign, Val: types.VirtualMachinePowerStatePoweredOn},
		{Name: "guest.ipAddress", Op: types.PropertyChangeOpRemove, Val: "10.0.0.5"},
		{Name: "name", Op: types.PropertyChangeOpAssign, Val: "w-1b"},
	}})
	assert.Equal(t, vctypes.VMUpdate{Ref: vctypes.Ref{Type: "VirtualMachine", Value: "vm-1"}, Kind: vctypes.UpdateModify, Changes: []vctypes.PropertyChange{
		{Name: "runtime.powerState", Value: vctypes.PoweredOn}, {Name: "guest.ipAddress", Value: nil}, {Name: "name", Value: "w-1b"},
	}}, u)
}
