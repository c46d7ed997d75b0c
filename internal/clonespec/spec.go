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
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

// Port is what a Builder reads of vCenter: the template's cards, disks
// and snapshots, the pool and datastore a clone is placed on.
// vctypes.Port implements it.
type Port interface {
	// LoadTemplate reads a template's cards, disks and snapshots (the
	// adapter keeps the read for the template's clones).
	LoadTemplate(ctx context.Context, template vctypes.Ref) (vctypes.Template, error)
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

// Builder builds clone requests. Create it with New; it is safe for
// concurrent use.
type Builder struct {
	port Port
	cfg  *config.Config
	live func() *config.Config
	ips  *ippool.Pool
	now  func() time.Time

	mu sync.Mutex
	// modeLogged holds the template/mode pairs whose clone mode was
	// logged (logCloneMode).
	modeLogged map[string]bool
}

// New returns a Builder.
func New(o Options) *Builder {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Builder{port: o.Port, cfg: o.Config, live: o.Live, ips: o.IPs, now: now, modeLogged: map[string]bool{}}
}

// Template is a template's reference and the name errors and logs give it
// (a reference carries no name).
type Template struct {
	// Ref is the template's reference.
	Ref vctypes.Ref
	// Name is the template's name.
	Name string
}

// Request builds the clone request (docs/architecture.md,
// docs/flavors-and-capacity.md): the template's first NIC moved to the
// configured network, placement in the configured pool and datastore as a
// linked clone when the template allows it, Linux customization (hostname,
// fixed IP or DHCP; for a Windows model's VM, config.Config.OSOfRecord,
// sysprep with the computer name and the same network settings,
// sysprep.go), the record and its mirror, the flavor's CPU/RAM/disk,
// powered on. With a non-nil boot the clone has no guest customization:
// its guestinfo carries the cloud-init metadata (hostname, static IP
// plan) and userdata (docs/cloud-init.md). The clone mode is logged on
// log. The caller sets the request's folder (and may its name: the
// record's worker name).
func (b *Builder) Request(ctx context.Context, log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot) (vctypes.Clone, error) {
	return b.RequestAt(ctx, log, template, annot, flavor, boot, nil)
}

// RequestAt is Request for a clone sent to at (nil: the top-level keys,
// as Request): its pool, datastore and network. A linked clone needs its
// template's disks on the target datastore: when at's datastore holds
// none of them, the clone is full (said once per template and placement).
func (b *Builder) RequestAt(ctx context.Context, log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot, at *Location) (vctypes.Clone, error) {
	if annot == nil {
		return vctypes.Clone{}, fmt.Errorf("clone request from template %q: no annotation", template.Name)
	}
	return b.RequestFor(ctx, log, template, annot, flavor, boot, at, b.isWindows(annot))
}

// RequestFor is RequestAt for a VM whose guest OS the caller knows:
// windows true customizes it with sysprep. A job's spawn takes it from
// its plan (internal/admission.Plan), not from the running configuration.
func (b *Builder) RequestFor(ctx context.Context, log *slog.Logger, template Template, annot *inventory.Annotation, flavor *config.Flavor, boot *cloudinit.Boot, at *Location, windows bool) (vctypes.Clone, error) {
	tname := template.Name
	if annot == nil {
		return vctypes.Clone{}, fmt.Errorf("clone request from template %q: no annotation", tname)
	}
	tpl, err := b.port.LoadTemplate(ctx, template.Ref)
	if err != nil {
		return vctypes.Clone{}, fmt.Errorf("load devices of template %q: %w", tname, err)
	}
	if tpl.NICs == 0 {
		return vctypes.Clone{}, fmt.Errorf("template %q has no network card: a worker template needs one", tname)
	}
	network, poolPath, dsName := b.cfg.NetworkString, b.cfg.ResourcePoolString, b.cfg.DatastoreString
	if at != nil {
		network, poolPath, dsName = at.Network, at.ResourcePool, at.Datastore
	}
	var pool vctypes.Ref
	if at != nil && poolPath != "" {
		pool, err = b.port.ResourcePoolAt(ctx, poolPath)
	} else {
		pool, err = b.port.LoadResourcePool(ctx)
	}
	if err != nil {
		return vctypes.Clone{}, fmt.Errorf("load resource pool %q: %w", poolPath, err)
	}
	ds, err := b.port.LoadDatastore(ctx, dsName)
	if err != nil {
		return vctypes.Clone{}, fmt.Errorf("load datastore %q: %w", dsName, err)
	}

	// The first NIC gets the static IP when one was allocated
	// (Customization).
	var lease *ippool.Lease
	if annot.IPAddress != "" {
		l, ok := b.ips.Lookup(annot.IPAddress)
		if !ok {
			return vctypes.Clone{}, fmt.Errorf("ip %s of vm %q is in no configured range", annot.IPAddress, annot.WorkerName)
		}
		lease = &l
	}
	custom, err := Customization(annot.WorkerName, tpl.NICs, lease, windows)
	if err != nil {
		return vctypes.Clone{}, fmt.Errorf("clone request from template %q: %w", tname, err)
	}

	mode := decideCloneMode(tpl, flavor, b.cfg.LinkedCloneSnapshot)
	if at != nil {
		mode = onPlacement(mode, tpl, ds, dsName, at.Placement)
	}
	b.logCloneMode(log, template, annot, flavor, mode)
	req := vctypes.Clone{
		Template:      template.Ref,
		Name:          annot.WorkerName,
		Pool:          pool,
		Datastore:     ds,
		Snapshot:      mode.Snapshot,
		Growth:        flavor.Growth(),
		Network:       &vctypes.CloneNetwork{Name: network, CardType: b.cfg.CardName},
		Record:        annot.Record(),
		Customization: custom,
		PowerOn:       true,
	}
	if boot != nil {
		opts, err := b.CloudInitOptions(annot.WorkerName, annot.IPAddress, *boot)
		if err != nil {
			return vctypes.Clone{}, fmt.Errorf("cloud-init guestinfo of clone %q of template %q: %w", annot.WorkerName, tname, err)
		}
		req.Options = opts
		// cloud-init configures hostname and network from the metadata;
		// a customization would race it.
		req.Customization = nil
	}
	return req, nil
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
