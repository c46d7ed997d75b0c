package clonespec

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/ippool"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Port is what a Builder reads of vCenter: the template's devices and
// snapshots, the network, pool and datastore a clone is placed on.
// vcenter.Port implements it.
type Port interface {
	// LoadTemplate reads a template's device list and snapshots.
	LoadTemplate(ctx context.Context, template types.ManagedObjectReference) (mo.VirtualMachine, error)
	// SetupEthernetCard points card at the configured network.
	SetupEthernetCard(ctx context.Context, card *types.VirtualEthernetCard, ethernetCardName, networkName string) error
	// LoadResourcePool returns the configured resource pool.
	LoadResourcePool(ctx context.Context) (vctypes.Ref, error)
	// LoadDatastore returns the datastore named name.
	LoadDatastore(ctx context.Context, name string) (vctypes.Ref, error)
	// ResourcePoolAt returns the resource pool at path (a placement's).
	ResourcePoolAt(ctx context.Context, path string) (vctypes.Ref, error)
}

// Location is where a clone goes when the configuration has
// [[placements]] (internal/placement): its placement's name, resource pool
// path, datastore and network. Without it a clone goes where the
// top-level keys say.
type Location struct {
	// Placement names the placement (logs, the clone-mode line's key).
	Placement string
	// ResourcePool is the pool's or cluster's path ("" : the configured
	// pool).
	ResourcePool string
	// Datastore is the datastore's name ("" : datastoreString).
	Datastore string
	// Network is the network of the first NIC.
	Network string
}

// Options are what New needs. Now defaults to time.Now.
type Options struct {
	// Port reads the template, network, pool and datastore.
	Port Port
	// Config gives the network, datastore and linkedCloneSnapshot.
	Config *config.Config
	// Live, when set, returns the running configuration (a reload
	// replaces it: the models' os is read from it). Nil: Config.
	Live func() *config.Config
	// IPs gives the network settings of a worker's static IP.
	IPs *ippool.Pool
	// Now is the clock of the template cache and of instance ids.
	Now func() time.Time
}

// Builder builds clone specifications. Create it with New; it is safe for
// concurrent use.
type Builder struct {
	port    Port
	cfg     *config.Config
	live    func() *config.Config
	ips     *ippool.Pool
	now     func() time.Time
	devices *templateDevices

	mu sync.Mutex
	// modeLogged holds the template/mode pairs whose clone mode was
	// logged (logCloneMode).
	modeLogged map[string]bool
}

// New returns a Builder with an empty template cache.
func New(o Options) *Builder {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Builder{port: o.Port, cfg: o.Config, live: o.Live, ips: o.IPs, now: now,
		devices: newTemplateDevices(now), modeLogged: map[string]bool{}}
}

// Template is a template's reference and the name errors and logs give it
// (a reference carries no name).
type Template struct {
	// Ref is the template's reference.
	Ref types.ManagedObjectReference
	// Name is the template's name.
	Name string
}

// Forget drops what the Builder cached of template: a clone from it
// failed, the template may have changed.
func (b *Builder) Forget(template types.ManagedObjectReference) {
	b.devices.forget(template)
}

// Spec builds the clone specification (docs/architecture.md,
// docs/flavors-and-capacity.md): the template's first NIC moved to the
// configured network, placement in the configured pool and datastore as a
// linked clone when the template allows it, Linux customization (hostname,
// fixed IP or DHCP; for a Windows model's VM, config.Config.OSOfRecord,
// sysprep with the computer name and the same network settings,
// sysprep.go), the annotation and its mirror, the flavor's
// CPU/RAM/disk, tools after power on, powered on. With a non-nil boot the
// clone has no guest customization: its guestinfo carries the cloud-init
// metadata (hostname, static IP plan) and userdata (docs/cloud-init.md).
// The clone mode is logged on log.
func (b *Builder) Spec(ctx context.Context, log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot) (*types.VirtualMachineCloneSpec, error) {
	return b.SpecAt(ctx, log, template, annot, flavor, boot, nil)
}

// SpecAt is Spec for a clone sent to at (nil: the top-level keys, as
// Spec): its pool, datastore and network. A linked clone needs its
// template's disks on the target datastore: when at's datastore holds
// none of them, the clone is full (said once per template and placement).
func (b *Builder) SpecAt(ctx context.Context, log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot, at *Location) (*types.VirtualMachineCloneSpec, error) {
	if annot == nil {
		return nil, fmt.Errorf("clone spec from template %q: no annotation", template.Name)
	}
	return b.SpecFor(ctx, log, template, annot, flavor, boot, at, b.isWindows(annot))
}

// SpecFor is SpecAt for a VM whose guest OS the caller knows: windows
// true customizes it with sysprep. A job's spawn takes it from its plan
// (internal/admission.Plan), not from the running configuration.
func (b *Builder) SpecFor(ctx context.Context, log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot, at *Location, windows bool) (*types.VirtualMachineCloneSpec, error) {
	tname := template.Name
	if annot == nil {
		return nil, fmt.Errorf("clone spec from template %q: no annotation", tname)
	}
	tinfo, err := b.devices.load(ctx, template.Ref, b.loadTemplateInfo)
	if err != nil {
		return nil, fmt.Errorf("load devices of template %q: %w", tname, err)
	}
	devices := tinfo.Devices
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	if len(cards) == 0 {
		return nil, fmt.Errorf("template %q has no network card: a worker template needs one", tname)
	}
	first, ok := cards[0].(types.BaseVirtualEthernetCard)
	if !ok {
		return nil, fmt.Errorf("template %q: first network card is not an ethernet card", tname)
	}
	network, poolPath, dsName := b.cfg.NetworkString, b.cfg.ResourcePoolString, b.cfg.DatastoreString
	if at != nil {
		network, poolPath, dsName = at.Network, at.ResourcePool, at.Datastore
	}
	if err := b.port.SetupEthernetCard(ctx, first.GetVirtualEthernetCard(), b.cfg.CardName, network); err != nil {
		return nil, fmt.Errorf("set up network card of template %q on network %q: %w", tname, network, err)
	}
	var pool vctypes.Ref
	if at != nil && poolPath != "" {
		pool, err = b.port.ResourcePoolAt(ctx, poolPath)
	} else {
		pool, err = b.port.LoadResourcePool(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("load resource pool %q: %w", poolPath, err)
	}
	ds, err := b.port.LoadDatastore(ctx, dsName)
	if err != nil {
		return nil, fmt.Errorf("load datastore %q: %w", dsName, err)
	}

	// The first NIC gets the static IP when one was allocated
	// (Customization).
	var lease *ippool.Lease
	if annot.IPAddress != "" {
		l, ok := b.ips.Lookup(annot.IPAddress)
		if !ok {
			return nil, fmt.Errorf("ip %s of vm %q is in no configured range", annot.IPAddress, annot.WorkerName)
		}
		lease = &l
	}
	custom, err := Customization(annot.WorkerName, len(cards), lease, windows)
	if err != nil {
		return nil, fmt.Errorf("clone spec from template %q: %w", tname, err)
	}

	config := &types.VirtualMachineConfigSpec{
		DeviceChange: []types.BaseVirtualDeviceConfigSpec{
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: cards[0]},
		},
		Tools: &types.ToolsConfigInfo{AfterPowerOn: types.NewBool(true)},
	}
	vcenter.ApplyRecord(config, annot.Record())
	if err := ApplyFlavor(config, flavor, devices); err != nil {
		return nil, fmt.Errorf("apply flavor %q to clone of template %q: %w", FlavorName(flavor), tname, err)
	}

	mode := decideCloneMode(tinfo, flavor, b.cfg.LinkedCloneSnapshot)
	if at != nil {
		mode = onPlacement(mode, tinfo.Devices, vcenter.MORef(ds), dsName, at.Placement)
	}
	b.logCloneMode(log, template, annot, flavor, mode)
	diskMove := types.VirtualMachineRelocateDiskMoveOptionsMoveChildMostDiskBacking
	if mode.Mode == ModeLinked {
		diskMove = types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking
	}
	poolRef, dsRef := vcenter.MORef(pool), vcenter.MORef(ds)
	spec := &types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{
			Pool:         &poolRef,
			Datastore:    &dsRef,
			DiskMoveType: string(diskMove),
		},
		Snapshot:      mode.Snapshot,
		Customization: custom,
		Config:        config,
		PowerOn:       true,
		Template:      false,
	}
	if boot != nil {
		opts, err := b.CloudInitOptions(annot.WorkerName, annot.IPAddress, *boot)
		if err != nil {
			return nil, fmt.Errorf("cloud-init guestinfo of clone %q of template %q: %w", annot.WorkerName, tname, err)
		}
		config.ExtraConfig = append(config.ExtraConfig, vcenter.OptionValues(opts)...)
		// cloud-init configures hostname and network from the metadata;
		// a customization would race it.
		spec.Customization = nil
	}
	return spec, nil
}

// instanceID is a cloud-init instance id new for every worker: the VM name
// and the time, so that a reused (claimed) VM runs its userdata again.
func (b *Builder) instanceID(vmName string) string {
	return vmName + "-" + strconv.FormatInt(b.now().UnixNano(), 36)
}

// maxHostnameLen is the DNS label limit a Linux hostname must respect.
const maxHostnameLen = 63

// SanitizeHostname turns a VM name into a valid hostname label: lower
// case letters, digits and dashes, no leading or trailing dash, at most 63
// characters.
func SanitizeHostname(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > maxHostnameLen {
		s = strings.TrimRight(s[:maxHostnameLen], "-")
	}
	return s
}

// FlavorName is the flavor's name, "" for none.
func FlavorName(f *config.Flavor) string {
	if f == nil {
		return ""
	}
	return f.Name
}

// onPlacement is the placement rule of a clone decision: a linked clone
// onto datastore ds (named dsName) of placement needs the template's disks
// (devices) on ds; when they are not there the clone is full.
func onPlacement(mode cloneDecision, devices object.VirtualDeviceList, ds types.ManagedObjectReference, dsName, placement string) cloneDecision {
	if mode.Mode != ModeLinked || disksOn(devices, ds) {
		return mode
	}
	return cloneDecision{Mode: ModeFull, Placement: placement,
		Reason: "template's disks are not on datastore " + strconv.Quote(dsName) + " of placement " + strconv.Quote(placement) + ": full clone (name a copy in its templateCopies for linked clones)"}
}

// disksOn tells whether every disk of devices is backed on datastore ds
// (a template without disks: true). A backing that names no datastore is
// taken as on it.
func disksOn(devices object.VirtualDeviceList, ds types.ManagedObjectReference) bool {
	for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
		disk, ok := d.(*types.VirtualDisk)
		if !ok {
			continue
		}
		fb, ok := disk.Backing.(types.BaseVirtualDeviceFileBackingInfo)
		if !ok {
			continue
		}
		if ref := fb.GetVirtualDeviceFileBackingInfo().Datastore; ref != nil && ref.Value != ds.Value {
			return false
		}
	}
	return true
}
