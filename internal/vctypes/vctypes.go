package vctypes

import (
	"context"
	"errors"
	"net"
	"net/url"
	"time"
)

// Ref names one vCenter object: its managed object type
// ("VirtualMachine", "Folder", "ResourcePool"…) and its managed object id
// ("vm-42"). It is only a name: it carries no connection, so one read
// before a re-login is still good after it.
type Ref struct {
	Type  string
	Value string
}

// IsZero tells whether r names nothing.
func (r Ref) IsZero() bool { return r.Value == "" }

// String is "Type:Value", as govmomi prints a reference.
func (r Ref) String() string { return r.Type + ":" + r.Value }

// PowerState is a VM's power state, with vSphere's values.
type PowerState string

// The power states of a VM.
const (
	PoweredOff PowerState = "poweredOff"
	PoweredOn  PowerState = "poweredOn"
	Suspended  PowerState = "suspended"
)

// PoolRuntime is what the hatchery reads of a resource pool's runtime:
// CPU in MHz, memory in bytes, as vCenter reports them. Unreserved is
// what the pool can still reserve for new VMs (unreservedForVm).
type PoolRuntime struct {
	CPUMaxMHz, CPUUsageMHz, CPUUnreservedMHz                int64
	MemoryMaxBytes, MemoryUsageBytes, MemoryUnreservedBytes int64
}

// PoolReader reads the hatchery's resource pool: the capacity decisions
// (internal/admission) and the metrics collector (internal/collector)
// both use it. Port implements it.
type PoolReader interface {
	// LoadResourcePool returns the configured resource pool.
	LoadResourcePool(ctx context.Context) (Ref, error)
	// ResourcePoolRuntime reads a resource pool's runtime.
	ResourcePoolRuntime(ctx context.Context, pool Ref) (*PoolRuntime, error)
}

// GuestAuth is a guest OS account (name and password). It holds a
// secret: never log it.
type GuestAuth struct {
	Username string
	Password string
}

// GuestProgram is a program to start in a guest: its path, its arguments
// (one string, as the guest's shell reads them) and extra environment
// variables ("NAME=value").
type GuestProgram struct {
	Path string
	Args string
	Env  []string
}

// FaultKind is the kind of a fault vCenter answered, as far as the
// hatchery's decisions tell faults apart. The zero value is no fault:
// vCenter did not answer (a transport error, a timeout) or the error is
// not vCenter's.
type FaultKind int

// The fault kinds. internal/vcenter/vim (vocabulary.go, FaultKindOf) maps
// govmomi's faults on them.
const (
	// NoFault: no fault vCenter answered.
	NoFault FaultKind = iota
	// FaultOther is a fault vCenter answered that no kind below names.
	FaultOther
	// FaultNotAuthenticated: the session is not (or no longer) logged in.
	FaultNotAuthenticated
	// FaultSystemError: vCenter's own internal error.
	FaultSystemError
	// FaultNotFound: the object named is gone (ManagedObjectNotFound).
	FaultNotFound
	// FaultInvalidPowerState: the VM is not in a power state the
	// operation accepts.
	FaultInvalidPowerState
	// FaultDuplicateName: an object of that name exists already.
	FaultDuplicateName
	// FaultInvalidGuestLogin: the guest refused the account.
	FaultInvalidGuestLogin
	// FaultInsufficientResources: a resource limit refused the operation.
	FaultInsufficientResources
	// FaultConcurrentAccess: the object changed since it was read (a
	// reconfigure's changeVersion no longer current).
	FaultConcurrentAccess
	// FaultNoDiskSpace: the target datastore has no room for the VM's
	// files (NoDiskSpace, OutOfDiskSpace…). It points at the placement.
	FaultNoDiskSpace
	// FaultDatastoreUnavailable: the target datastore is inaccessible or
	// not mounted where the VM would run. It points at the placement.
	FaultDatastoreUnavailable
	// FaultHostUnavailable: no host of the placement can take the VM
	// (disconnected, in maintenance, not responding). It points at the
	// placement.
	FaultHostUnavailable
	// FaultNotSupported: this vCenter, its licence or the object does not
	// offer the operation (NotSupported, NotImplemented, MethodNotFound,
	// GuestOperationsUnavailable, ToolsUnavailable…): a capability it
	// lacks, not a transient failure.
	FaultNotSupported
	// FaultNoPermission: the session's user lacks a privilege the
	// operation needs (NoPermission).
	FaultNoPermission
)

var faultNames = map[FaultKind]string{
	NoFault:                    "no fault",
	FaultOther:                 "vcenter fault",
	FaultNotAuthenticated:      "not authenticated",
	FaultSystemError:           "vcenter system error",
	FaultNotFound:              "managed object not found",
	FaultInvalidPowerState:     "invalid power state",
	FaultDuplicateName:         "duplicate name",
	FaultInvalidGuestLogin:     "invalid guest login",
	FaultInsufficientResources: "insufficient resources",
	FaultConcurrentAccess:      "concurrent access",
	FaultNoDiskSpace:           "no disk space",
	FaultDatastoreUnavailable:  "datastore unavailable",
	FaultHostUnavailable:       "host unavailable",
	FaultNotSupported:          "not supported",
	FaultNoPermission:          "no permission",
}

// FaultKinds are every kind but NoFault.
var FaultKinds = []FaultKind{
	FaultOther, FaultNotAuthenticated, FaultSystemError, FaultNotFound, FaultInvalidPowerState,
	FaultDuplicateName, FaultInvalidGuestLogin, FaultInsufficientResources, FaultConcurrentAccess,
	FaultNoDiskSpace, FaultDatastoreUnavailable, FaultHostUnavailable, FaultNotSupported, FaultNoPermission,
}

// PointsAtPlacement tells whether err is a fault of where the VM was to
// go rather than of what it was cloned from: the placement backs off
// (internal/placement) and the template's quarantine does not count it.
func PointsAtPlacement(err error) bool {
	switch KindOf(err) {
	case FaultNoDiskSpace, FaultDatastoreUnavailable, FaultHostUnavailable:
		return true
	}
	return false
}

// DatastoreSpace is what the hatchery reads of a datastore to place a
// clone: its name, its free space and capacity in bytes, and whether it is
// accessible.
type DatastoreSpace struct {
	Ref           Ref
	Name          string
	FreeBytes     int64
	CapacityBytes int64
	Accessible    bool
}

// Error names the kind: a FaultKind is a target for errors.Is
// (errors.Is(err, vctypes.FaultDuplicateName)), matched by a Fault of that
// kind in err's chain.
func (k FaultKind) Error() string {
	if s, ok := faultNames[k]; ok {
		return s
	}
	return "unknown fault kind"
}

// Fault is an error vCenter answered with a fault, its kind read by
// internal/vcenter (vcenter.Classify). Its text is the error's.
type Fault struct {
	Kind FaultKind
	Err  error
}

// Error is the wrapped error's text.
func (f *Fault) Error() string { return f.Err.Error() }

// Unwrap returns the wrapped error.
func (f *Fault) Unwrap() error { return f.Err }

// Is matches the fault's kind: errors.Is(err, vctypes.FaultNotFound).
func (f *Fault) Is(target error) bool {
	k, ok := target.(FaultKind)
	return ok && k != NoFault && k == f.Kind
}

// KindOf returns the kind of the first Fault in err's chain, NoFault when
// there is none (vCenter did not answer, or err was not classified).
func KindOf(err error) FaultKind {
	var f *Fault
	if errors.As(err, &f) {
		return f.Kind
	}
	return NoFault
}

// ErrLockTaken is wrapped by a lock's creation when a lock object of that
// name exists (vCenter answered DuplicateName): another holder has it.
var ErrLockTaken = errors.New("lock taken")

// ErrNotConnected is wrapped by the error of a port call made before the
// client first reached vCenter (a daemon starting while vCenter does not
// answer yet).
var ErrNotConnected = errors.New("vcenter not connected")

// ErrWatchLost means the VM change watch is gone or was never started in
// the current session: the caller resets it and reads every VM again.
var ErrWatchLost = errors.New("vm change watch lost")

// ErrPoweredOff is returned by a suspend of a powered-off VM: only a
// running VM can be suspended.
var ErrPoweredOff = errors.New("vm is powered off")

// ErrPlacementUnresolved is wrapped by the error of a placement lookup
// (resource pool, folder, datastore, network) that vCenter answered with no
// such object, or with several: a topology problem of the configuration,
// which the vCenter client caches with a back-off, logs once and shows on
// /mon/status. Its callers need not log it again above DEBUG.
var ErrPlacementUnresolved = errors.New("vcenter placement unresolved")

// Unanswered tells whether err is vCenter not answering: a transport
// failure (a connection refused, closed or reset, a request's own timeout)
// rather than an answer of vCenter's; a call cancelled by its caller (a
// shutdown) is not one. The vCenter client logs such an outage twice, when
// it starts and when it ends (`vcenter unreachable`, `vcenter reachable
// again`); the loops that meet it at every pass log it at DEBUG, so that
// an outage, a vCenter restart included, is not a line per pass
// (docs/operations.md#when-vcenter-restarts).
func Unanswered(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// Event is one event vCenter kept about a VM: its type ("VmPoweredOnEvent"),
// its key (vCenter numbers events in the order it logs them) and when
// vCenter created it.
type Event struct {
	Type    string
	Key     int32
	Created time.Time
}
