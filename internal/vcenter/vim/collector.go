package vim

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Collector is the property-collector side of the adapter: what vCenter
// reports by itself, read through property collectors and views of one
// connection — the views over the inventory's scope and the listing
// through them (scope.go), the VM change watch (watch.go) and its filter
// on the scope's membership (members.go), the probe and the reads by
// reference (probe.go), and the wait collector with the waits that learn
// from it (waits.go, await.go). internal/vcenter's Client makes one when
// it connected (the *vim25.Client is then made, and stays the same for
// the connection's life: a re-login is the transport's) and delegates to
// it; each session-scoped object it makes (a view, a collector) records
// the session generation it was made in (CollectorConfig.Generation) and
// is made again in the next one.
//
// It never checks whether the client is connected nor classifies its
// errors: its caller does both. It is safe for concurrent use.
type Collector struct {
	vim        *vim25.Client
	pc         *property.Collector
	datacenter *object.Datacenter
	dc         string // the datacenter's name, for errors
	log        *slog.Logger

	gen            func() int64
	roots          func(context.Context) ([]ScopeRoot, error)
	pollInterval   time.Duration
	requestTimeout time.Duration

	viewsMu sync.Mutex
	views   *ScopeView // reused ContainerViews over the inventory's scope
	// found are the folders of templates found outside the configured
	// scope by name (Discover): part of the scope from then on; their
	// count is the scope's version. Guarded by foundMu.
	foundMu sync.Mutex
	found   []types.ManagedObjectReference

	watchMu sync.Mutex
	watch   *vmWatch       // the VM change watch (watch.go); nil when none
	retired []retiredWatch // abandoned collectors (the watch's, the waits') not destroyed yet
	// watchNow is the watch's clock (time.Now when nil; SetClock).
	watchNow func() time.Time

	// waits is the wait collector (waits.go).
	waits *waitHub

	// names are the VMs' names as last seen, by reference: errors and
	// logs name a VM without a round trip (Name).
	namesMu sync.Mutex
	names   map[types.ManagedObjectReference]string
}

// CollectorConfig is what a Collector is made of: the connection's
// clients, the session generation and the scope's folders.
type CollectorConfig struct {
	// Vim is the connection's client; PC its default property collector
	// (reads, and the factory of the collectors made here).
	Vim *vim25.Client
	PC  *property.Collector
	// Datacenter is the datacenter the client works in (its name in
	// errors; its VM folder, where Discover looks for a template).
	Datacenter *object.Datacenter
	// Generation is the session generation: it changes at each re-login,
	// which loses every session-scoped object made before.
	Generation func() int64
	// Roots resolves the scope's folders (the adapter's configuration
	// and placement lookups), Found's included; the views are made again
	// when Found grows.
	Roots func(context.Context) ([]ScopeRoot, error)
	// PollInterval is the period of a wait's reads while its object is
	// not in the wait collector's view; RequestTimeout bounds every
	// request (a long poll takes at most half of it).
	PollInterval, RequestTimeout time.Duration
	// Log receives the collector's logs.
	Log *slog.Logger
}

// NewCollector returns the collector of a connection. It does no I/O:
// views, watch and wait collector are made at their first use.
func NewCollector(cfg CollectorConfig) *Collector {
	c := &Collector{
		vim:            cfg.Vim,
		pc:             cfg.PC,
		datacenter:     cfg.Datacenter,
		dc:             cfg.Datacenter.Name(),
		log:            cfg.Log,
		gen:            cfg.Generation,
		roots:          cfg.Roots,
		names:          map[types.ManagedObjectReference]string{},
		pollInterval:   cfg.PollInterval,
		requestTimeout: cfg.RequestTimeout,
	}
	c.waits = newWaitHub(c)
	return c
}

// Close stops the wait collector's goroutine and joins it (it destroys
// its collector, which ends its long poll, and cancels the requests of
// its polls still in flight, a retired collector's included: waitHub.close)
// and destroys the VM change watch's collector and the scope's views,
// best effort, bounded by ctx.
func (c *Collector) Close(ctx context.Context) {
	c.waits.close(ctx)
	c.closeWatch(ctx)
	c.destroyScopeViews(ctx)
}

// IsTransport tells whether err is a transport failure: vCenter did not
// answer (a fault is an answer).
func IsTransport(err error) bool {
	var ue *url.Error
	var ne net.Error
	return err != nil && (errors.As(err, &ue) || errors.As(err, &ne))
}

// VMWatchProperties are the properties the change watch reports. Each is a
// scalar that moves whenever something the hatchery reads moves: the name,
// the template flag, config.changeVersion (any reconfiguration: the
// annotation, its ExtraConfig mirror, CPU and memory), the power state, the
// primary guest IP and guest-operations readiness. A reported change makes
// the inventory read that VM's VMProperties again. Limit: an IP change on a
// secondary NIC alone (guest.net) moves none of them; the periodic resync
// catches it.
var VMWatchProperties = []string{
	"name",
	"config.template",
	"config.changeVersion",
	"runtime.powerState",
	"guest.ipAddress",
	"guest.guestOperationsReady",
}

// VMProperties are the leaf properties ListVirtualMachines retrieves: only
// what the hatchery reads (docs/design.md#inventory), never whole config/summary/guest objects.
var VMProperties = []string{
	"name",
	"config.template",
	"config.annotation",
	"config.changeVersion",
	"config.extraConfig",
	"config.hardware.numCPU",
	"config.hardware.memoryMB",
	"runtime.powerState",
	"guest.ipAddress",
	"guest.net",
	"guest.guestOperationsReady",
}

// Name names a VM in errors and logs without a round trip: the name last
// seen (loaded by name, cloned, renamed, listed, retrieved), else its
// reference.
func (c *Collector) Name(vm types.ManagedObjectReference) string {
	c.namesMu.Lock()
	n, ok := c.names[vm]
	c.namesMu.Unlock()
	if ok {
		return n
	}
	return vm.Value
}

// LearnName records one VM's name (empty: forget it), for Name.
func (c *Collector) LearnName(vm types.ManagedObjectReference, name string) {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	if name == "" {
		delete(c.names, vm)
		return
	}
	c.names[vm] = name
}

// learnNames records the names of VMs read from vCenter, for Name.
func (c *Collector) learnNames(vms []mo.VirtualMachine) {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	for _, o := range vms {
		if o.Name != "" {
			c.names[o.Self] = o.Name
		}
	}
}
