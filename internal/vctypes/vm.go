package vctypes

// Option is one key/value setting of a VM's advanced configuration
// (vSphere's extraConfig): the ownership record's mirror, cloud-init's
// guestinfo. Only string values are carried: the hatchery writes and
// reads no other.
type Option struct {
	Key   string
	Value string
}

// OptionValue returns the value of the first option of opts named key,
// and whether there is one.
func OptionValue(opts []Option, key string) (string, bool) {
	for _, o := range opts {
		if o.Key == key {
			return o.Value, true
		}
	}
	return "", false
}

// Record is what a write of the hatchery's ownership record sets on a
// VM: the text of its Notes field (config.annotation) and the options
// that mirror it.
type Record struct {
	Notes   string
	Options []Option
}

// VMInfo is what the inventory reads of one VM or template: the leaf
// properties of vim.VMProperties, in the project's terms. A property
// vCenter did not report is the zero value.
type VMInfo struct {
	Ref      Ref
	Name     string
	Template bool
	// Notes is config.annotation.
	Notes string
	// Options are config.extraConfig's string-valued settings.
	Options    []Option
	NumCPU     int32
	MemoryMB   int32
	PowerState PowerState
	// ChangeVersion is config.changeVersion.
	ChangeVersion string
	// IPAddress is guest.ipAddress (the primary address).
	IPAddress string
	// NetIPAddresses are guest.net[].ipAddress, in vCenter's order.
	NetIPAddresses       []string
	GuestOperationsReady bool
}

// UpdateKind is the kind of a change watch's report on a VM.
type UpdateKind string

// The kinds of report, with vSphere's values.
const (
	// UpdateEnter is a VM's first report: every watched property.
	UpdateEnter UpdateKind = "enter"
	// UpdateModify carries the watched properties that changed.
	UpdateModify UpdateKind = "modify"
	// UpdateLeave: the VM is gone.
	UpdateLeave UpdateKind = "leave"
)

// PropertyChange is one watched property's new value: a string, a bool,
// a PowerState, or nil when vCenter removed it; another type is a value
// the reader does not know (it reads the VM again rather than guess).
type PropertyChange struct {
	Name  string
	Value any
}

// VMUpdate is a change watch's report on one VM.
type VMUpdate struct {
	Ref     Ref
	Kind    UpdateKind
	Changes []PropertyChange
}

// InstantClone is an instant clone's request: the child's name, the
// folder it goes to (the parent's pool and datastore are its: the child
// stays on its parent's host) and its advanced settings (the ownership
// record's mirror, cloud-init's guestinfo, in order).
type InstantClone struct {
	Name    string
	Folder  Ref
	Options []Option
}

// ConfigChange is a reconfigure of a VM in one task, in the project's
// terms: a new name ("" keeps it; vCenter renames on reconfigure), the
// compare-and-swap on the VM's change version ("" none: with one, vCenter
// refuses the change, FaultConcurrentAccess, when the VM changed since that
// version was read), the Notes (nil keeps them), the ownership record (its
// Notes and mirror options, written after Notes; nil leaves it), the
// options to set (an empty value removes a key; after the record's) and
// the growth of the hardware (nil leaves it). The zero value changes
// nothing.
type ConfigChange struct {
	Name          string
	ChangeVersion string
	Notes         *string
	Record        *Record
	Options       []Option
	Growth        *Growth
}

// Growth is a reconfigure's growth of a VM's hardware to a flavor: its
// CPUs and memory are set, and its first virtual disk grows to DiskSizeGB
// (0 leaves the disks). A disk is grown, never shrunk: a size below the
// disk's, or a size for a VM with no disk, is refused before anything is
// sent. Flavor names the flavor in errors.
type Growth struct {
	Flavor     string
	CPUs       int32
	MemoryMB   int64
	DiskSizeGB int64
}

// PrepError is a request the adapter could not make into vCenter's
// specification: nothing was sent, the VM is as it was. Step names what
// failed ("load devices", "apply flavor \"large\"").
type PrepError struct {
	Step string
	Err  error
}

// Error is "step: cause".
func (e *PrepError) Error() string { return e.Step + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PrepError) Unwrap() error { return e.Err }
