package warmpool

import (
	"context"
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/admission"
	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/custody"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/lifecycle"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// Port is what the pool does to its VMs in vCenter, in the project's
// vocabulary (internal/vctypes): its errors carry their fault kind.
// vctypes.Port implements it.
type Port interface {
	// StartVirtualMachine powers the VM on (resumes a suspended one).
	StartVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// ShutdownVirtualMachine powers the VM off.
	ShutdownVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// SuspendVirtualMachine suspends a powered-on VM.
	SuspendVirtualMachine(ctx context.Context, vm vctypes.Ref) error
	// ReconfigureVirtualMachine applies change in one task (a Name
	// renames the VM, a Growth grows it to a flavor); a change carrying a
	// ChangeVersion is refused with vctypes.FaultConcurrentAccess when the
	// VM changed. A *vctypes.PrepError when nothing was sent.
	ReconfigureVirtualMachine(ctx context.Context, vm vctypes.Ref, change vctypes.ConfigChange) error
	// WaitForGuestOperationsReady blocks until guest operations are ready
	// or ctx ends.
	WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error
	// WaitForVirtualMachineIP blocks until the guest reports an IPv4
	// address (expectedIP when not empty) or ctx ends.
	WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error)
}

// Host is what the pool asks of the hatchery it fills: the registration
// of V1 models, which is the hatchery's alone. The writes on the pool's
// VMs (deletion marks, deletions, records, userdata scrubs, the
// quarantine's attempts) are the Custody's, which the pool holds itself.
type Host interface {
	// NeedRegistration tells whether the V1 model's template must be
	// (re)built first.
	NeedRegistration(ctx context.Context, m *sdk.Model) bool
}

// CloneFunc clones template into a new VM named vmName carrying annot,
// sized for flavor (nil: the template's hardware). Its errors carry their
// fault kind (vcenter.Classify): a name taken is
// vctypes.FaultDuplicateName.
type CloneFunc func(ctx context.Context, template modelref.Template, vmName string, annot *inventory.Annotation, flavor *config.Flavor) (vctypes.Ref, error)

// Pool is one hatchery's warm pool. The hatchery builds it once in its New
// and sets every field before the first use; the pool's state beyond
// these is the lifecycle table's (docs/lifecycle.md).
type Pool struct {
	// Hatchery is the hatchery's name: the owner of the pool's VMs.
	Hatchery string
	// Config gives the pools (workerProvisioning), the flavors and the
	// provisioning concurrency.
	Config *config.Config
	// Live, when set, returns the running configuration (a reload
	// replaces it: internal/vsphere's Reconfigure); each decision reads it
	// once (conf). Nil: Config.
	Live func() *config.Config
	// Port reaches the pool's VMs in vCenter.
	Port Port
	// Inventory lists the VMs; the pool invalidates it after its writes.
	Inventory inventory.Inventory
	// Life is the hatchery's lifecycle table, shared with its other loops.
	Life *lifecycle.Table
	// CDS lists the enabled V1 models (nil: V1 pools are not filled).
	CDS cdsclient.Interface
	// IPs holds the static IP reservations.
	IPs *ippool.Pool
	// Admission returns the hatchery's admission, which reserves a
	// provisioning's footprint.
	Admission func() admission.Admission
	// Clone clones a pool VM (the hatchery's clone; tests replace it).
	Clone CloneFunc
	// CloudInit gives the cloud-init guestinfo a claim with a boot writes
	// for the worker name at the static address ip ("" none): metadata
	// with a new instance id, the userdata (the hatchery's
	// clonespec.Builder.CloudInitOptions). Nil: such a claim fails before
	// any reconfigure.
	CloudInit func(name, ip string, boot cloudinit.Boot) ([]vctypes.Option, error)
	// Custody makes the writes on the pool's VMs (deletion marks,
	// deletions, records, userdata scrubs) and counts the quarantine's
	// attempts; the hatchery holds the same one.
	Custody *custody.Custody
	// Host does what the hatchery owns: the V1 models' registration.
	Host Host
	// Demand learns the jobs of the pools that follow demand and sizes
	// them (nil: such a pool keeps its min; NewDemand).
	Demand *Demand
	// DemandStore keeps the learnt demand of each pool that follows
	// demand in vCenter, read before the pool's first decision and
	// written every hour (nil: a restart learns again; demand_store.go).
	DemandStore DemandStore
	// Log receives one line per decision.
	Log *slog.Logger
	// Now is the hatchery's clock.
	Now func() time.Time
}

// releaseGrace is the admission's release grace: how long a snapshot may
// take to show the pool's own writes.
func (p *Pool) releaseGrace() time.Duration { return p.Admission().ReleaseGrace() }

// IdleProvisioned tells whether vm is an idle VM of the warm pool: ours,
// provisioned, in the power state its record's idle state says
// (IdlePowerState), not being provisioned, claimed or deleted.
// Only such VMs may be claimed or removed as surplus.
func (p *Pool) IdleProvisioned(vm inventory.VM) bool {
	if _, ok := keyOf(p.Hatchery, vm); !ok {
		return false
	}
	return vm.Power() == IdlePowerState(vm.Annotation) &&
		p.Life.InVM(lifeVM(vm), lifecycle.Claimable()...)
}

// FlavorByName returns the configured flavor (config.Config.FlavorNamed),
// nil when none has that name.
func (p *Pool) FlavorByName(name string) *config.Flavor { return p.conf().FlavorNamed(name) }

// conf is the configuration a decision reads: Live's snapshot, else
// Config.
func (p *Pool) conf() *config.Config {
	if p.Live != nil {
		return p.Live()
	}
	return p.Config
}
