package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// ErrVCenterNotConnected is returned by every VCenter call made before the
// first successful connection to vCenter. It is vsphere.ErrNotConnected, so
// that the vsphere package recognises it.
var ErrVCenterNotConnected = vsphere.ErrNotConnected

// DialFunc connects and logs in to vCenter. The default is
// vsphere.NewGovmomiClient; tests and the demo may wrap it.
type DialFunc func(ctx context.Context, cfg vsphere.ClientConfig) (*vsphere.GovmomiClient, error)

// VCenter is a vsphere.VSphereClient that exists before vCenter answers: it
// dials in the background (Run) with back-off and, until the first success,
// fails every call at once with ErrVCenterNotConnected. Once connected it
// delegates to the one *vsphere.GovmomiClient, which keeps its own session
// alive and logs in again when vCenter forgets it, so no second dial is ever
// needed. It also remembers whether the last call failed in transport (vCenter
// unreachable) for the "vCenter" status line.
//
// It lets the daemon build the hatchery, the inventory and the framework at
// once, serve /mon/status while vCenter is down, and recover by itself.
type VCenter struct {
	cfg       vsphere.ClientConfig
	dial      DialFunc
	log       *slog.Logger
	backMin   time.Duration
	backMax   time.Duration
	onConnect func()
	host      string

	mu          sync.RWMutex
	cur         *vsphere.GovmomiClient
	dialErr     error     // last dial error while not connected
	attempts    int       // dial attempts so far
	unreachable error     // last transport error of a delegated call, nil after a success
	since       time.Time // when unreachable started
	closed      bool

	ready chan struct{} // closed at the first successful dial
}

// newVCenter builds the wrapper; Run dials.
func newVCenter(cfg vsphere.ClientConfig, dial DialFunc, backMin, backMax time.Duration, log *slog.Logger, onConnect func()) *VCenter {
	if dial == nil {
		dial = vsphere.NewGovmomiClient
	}
	return &VCenter{cfg: cfg, dial: dial, log: log, backMin: backMin, backMax: backMax, onConnect: onConnect, host: endpointHost(cfg.Endpoint), ready: make(chan struct{})}
}

// Ready is closed once the first dial succeeded.
func (v *VCenter) Ready() <-chan struct{} { return v.ready }

// Run dials vCenter until it succeeds or ctx ends, waiting between
// attempts from backMin doubling to backMax. It returns once connected.
func (v *VCenter) Run(ctx context.Context) {
	delay := v.backMin
	for {
		c, err := v.dial(ctx, v.cfg)
		if err == nil {
			v.mu.Lock()
			if v.closed { // shutdown raced the dial: never leak the session
				v.mu.Unlock()
				closeClient(ctx, c)
				return
			}
			v.cur, v.dialErr = c, nil
			v.attempts++
			close(v.ready)
			v.mu.Unlock()
			v.log.Info("vcenter connected", "endpoint", v.host)
			if v.onConnect != nil {
				v.onConnect()
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		v.mu.Lock()
		v.dialErr = err
		v.attempts++
		n := v.attempts
		v.mu.Unlock()
		var dnf *vsphere.DatacenterNotFoundError
		if errors.As(err, &dnf) {
			// vCenter answered and the login worked: a configuration mistake.
			v.log.Error("vcenter datacenter not found, retrying", "endpoint", v.host, "datacenter", dnf.Name, "existing", strings.Join(dnf.Existing, ", "), "attempt", n, "retry_in", delay)
		} else {
			v.log.Warn("vcenter not reachable, retrying", "endpoint", v.host, "attempt", n, "retry_in", delay, logkey.Err, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(delay*2, v.backMax)
	}
}

// Close logs out of vCenter when connected (bounded by ctx); later calls
// fail with ErrVCenterNotConnected. Call it after every user has stopped.
func (v *VCenter) Close(ctx context.Context) {
	v.mu.Lock()
	c := v.cur
	v.cur, v.closed = nil, true
	v.mu.Unlock()
	if c != nil {
		closeClient(ctx, c)
	}
}

// closeClient logs out within a bound of its own: ctx may be cancelled
// already (shutdown), and the logout must still be attempted.
func closeClient(ctx context.Context, c *vsphere.GovmomiClient) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	c.Close(cctx)
}

// logoutTimeout bounds the logout at shutdown: one SOAP request.
const logoutTimeout = 5 * time.Second

// Connected tells whether the first dial succeeded (and Close was not called).
func (v *VCenter) Connected() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.cur != nil
}

// Up tells whether vCenter is connected and its last request did not fail
// in transport: the "vCenter" status line is OK.
func (v *VCenter) Up() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.cur != nil && v.unreachable == nil
}

// SOAPCounts returns the cumulative SOAP counters of the connected client,
// for metrics.Metrics.SOAP; nil before the connection.
func (v *VCenter) SOAPCounts() map[string]metrics.SOAPCount {
	v.mu.RLock()
	c := v.cur
	v.mu.RUnlock()
	if c == nil {
		return nil
	}
	st := c.Stats()
	out := make(map[string]metrics.SOAPCount, len(st))
	for k, m := range st {
		out[k] = metrics.SOAPCount{Requests: m.Requests, Bytes: m.RequestBytes + m.ResponseBytes}
	}
	return out
}

// StatusLine is the "vCenter" line of /mon/status: AL while not connected
// or while the last request failed in transport, OK otherwise.
func (v *VCenter) StatusLine() sdk.MonitoringStatusLine {
	v.mu.RLock()
	defer v.mu.RUnlock()
	l := sdk.MonitoringStatusLine{Component: "vCenter", Status: sdk.MonitoringStatusAlert}
	switch {
	case v.cur == nil && v.dialErr == nil:
		l.Value = "connecting to " + v.host
	case v.cur == nil:
		l.Value = fmt.Sprintf("not connected to %s (%d attempts): %v", v.host, v.attempts, v.dialErr)
	case v.unreachable != nil:
		l.Value = fmt.Sprintf("unreachable since %s: %v", v.since.UTC().Format(time.RFC3339), v.unreachable)
	default:
		l.Status = sdk.MonitoringStatusOK
		l.Value = fmt.Sprintf("connected to %s as %s", v.host, v.cfg.User)
	}
	return l
}

// client returns the connected client or ErrVCenterNotConnected.
func (v *VCenter) client() (*vsphere.GovmomiClient, error) {
	v.mu.RLock()
	c, err := v.cur, v.dialErr
	v.mu.RUnlock()
	if c != nil {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%s): %w", ErrVCenterNotConnected, v.host, err)
	}
	return nil, fmt.Errorf("%w (%s): still connecting", ErrVCenterNotConnected, v.host)
}

// note records the outcome of a delegated call for the status line and
// returns err unchanged. Only transport failures (no answer from vCenter)
// count; a fault is an answer. Calls ended by their own ctx say nothing.
func (v *VCenter) note(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var ue *url.Error
	var ne net.Error
	transport := err != nil && (errors.As(err, &ue) || errors.As(err, &ne))
	v.mu.RLock()
	changed := transport != (v.unreachable != nil)
	v.mu.RUnlock()
	if !changed && !transport {
		return err
	}
	v.mu.Lock()
	switch {
	case transport && v.unreachable == nil:
		v.unreachable, v.since = err, time.Now()
		v.log.Warn("vcenter unreachable", "endpoint", v.host, logkey.Err, err)
	case transport:
		v.unreachable = err
	case v.unreachable != nil:
		v.unreachable = nil
		v.log.Info("vcenter reachable again", "endpoint", v.host)
	}
	v.mu.Unlock()
	return err
}

// rebind returns vm bound to c: a VM object made by NewVirtualMachine
// before the connection has no client of its own.
func rebind(c *vsphere.GovmomiClient, vm *object.VirtualMachine) *object.VirtualMachine {
	if vm == nil || vm.Client() == c.Vim25() {
		return vm
	}
	nv := c.NewVirtualMachine(vm.Reference())
	nv.InventoryPath = vm.InventoryPath
	return nv
}

// endpointHost is the endpoint's host[:port], never its user information.
func endpointHost(endpoint string) string {
	e := strings.TrimSpace(endpoint)
	if !strings.Contains(e, "://") {
		e = "https://" + e
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return "vcenter"
	}
	return u.Host
}

var _ vsphere.VSphereClient = (*VCenter)(nil)

// ListVirtualMachines implements vsphere.VSphereClient.
func (v *VCenter) ListVirtualMachines(ctx context.Context) ([]mo.VirtualMachine, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.ListVirtualMachines(ctx)
	return r, v.note(ctx, err)
}

// LoadVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) LoadVirtualMachine(ctx context.Context, name string) (*object.VirtualMachine, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadVirtualMachine(ctx, name)
	return r, v.note(ctx, err)
}

// NewVirtualMachine implements vsphere.VSphereClient. Before the
// connection the VM has no client; the other methods bind it on use.
func (v *VCenter) NewVirtualMachine(ref types.ManagedObjectReference) *object.VirtualMachine {
	c, err := v.client()
	if err != nil {
		return object.NewVirtualMachine(nil, ref)
	}
	return c.NewVirtualMachine(ref)
}

// LoadVirtualMachineDevices implements vsphere.VSphereClient.
func (v *VCenter) LoadVirtualMachineDevices(ctx context.Context, vm *object.VirtualMachine) (object.VirtualDeviceList, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadVirtualMachineDevices(ctx, rebind(c, vm))
	return r, v.note(ctx, err)
}

// LoadTemplate implements vsphere.VSphereClient.
func (v *VCenter) LoadTemplate(ctx context.Context, template *object.VirtualMachine) (mo.VirtualMachine, error) {
	c, err := v.client()
	if err != nil {
		return mo.VirtualMachine{}, err
	}
	r, err := c.LoadTemplate(ctx, rebind(c, template))
	return r, v.note(ctx, err)
}

// GetVirtualMachinePowerState implements vsphere.VSphereClient.
func (v *VCenter) GetVirtualMachinePowerState(ctx context.Context, vm *object.VirtualMachine) (types.VirtualMachinePowerState, error) {
	c, err := v.client()
	if err != nil {
		return "", err
	}
	r, err := c.GetVirtualMachinePowerState(ctx, rebind(c, vm))
	return r, v.note(ctx, err)
}

// StartVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) StartVirtualMachine(ctx context.Context, vm *object.VirtualMachine) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.StartVirtualMachine(ctx, rebind(c, vm)))
}

// ShutdownVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) ShutdownVirtualMachine(ctx context.Context, vm *object.VirtualMachine) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.ShutdownVirtualMachine(ctx, rebind(c, vm)))
}

// DestroyVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) DestroyVirtualMachine(ctx context.Context, vm *object.VirtualMachine) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.DestroyVirtualMachine(ctx, rebind(c, vm)))
}

// CloneVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) CloneVirtualMachine(ctx context.Context, vm *object.VirtualMachine, folder *object.Folder, name string, spec *types.VirtualMachineCloneSpec) (*types.ManagedObjectReference, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.CloneVirtualMachine(ctx, rebind(c, vm), folder, name, spec)
	return r, v.note(ctx, err)
}

// RenameVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) RenameVirtualMachine(ctx context.Context, vm *object.VirtualMachine, newName string) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.RenameVirtualMachine(ctx, rebind(c, vm), newName))
}

// ReconfigureVirtualMachine implements vsphere.VSphereClient.
func (v *VCenter) ReconfigureVirtualMachine(ctx context.Context, vm *object.VirtualMachine, spec types.VirtualMachineConfigSpec) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.ReconfigureVirtualMachine(ctx, rebind(c, vm), spec))
}

// MarkVirtualMachineAsTemplate implements vsphere.VSphereClient.
func (v *VCenter) MarkVirtualMachineAsTemplate(ctx context.Context, vm *object.VirtualMachine) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.MarkVirtualMachineAsTemplate(ctx, rebind(c, vm)))
}

// WaitForVirtualMachineShutdown implements vsphere.VSphereClient.
func (v *VCenter) WaitForVirtualMachineShutdown(ctx context.Context, vm *object.VirtualMachine) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.WaitForVirtualMachineShutdown(ctx, rebind(c, vm)))
}

// WaitForGuestOperationsReady implements vsphere.VSphereClient.
func (v *VCenter) WaitForGuestOperationsReady(ctx context.Context, vm *object.VirtualMachine) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.WaitForGuestOperationsReady(ctx, rebind(c, vm)))
}

// WaitForVirtualMachineIP implements vsphere.VSphereClient.
func (v *VCenter) WaitForVirtualMachineIP(ctx context.Context, vm *object.VirtualMachine, expectedIP string) (string, error) {
	c, err := v.client()
	if err != nil {
		return "", err
	}
	r, err := c.WaitForVirtualMachineIP(ctx, rebind(c, vm), expectedIP)
	return r, v.note(ctx, err)
}

// LoadFolder implements vsphere.VSphereClient.
func (v *VCenter) LoadFolder(ctx context.Context) (*object.Folder, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadFolder(ctx)
	return r, v.note(ctx, err)
}

// LoadNetwork implements vsphere.VSphereClient.
func (v *VCenter) LoadNetwork(ctx context.Context, name string) (object.NetworkReference, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadNetwork(ctx, name)
	return r, v.note(ctx, err)
}

// SetupEthernetCard implements vsphere.VSphereClient.
func (v *VCenter) SetupEthernetCard(ctx context.Context, card *types.VirtualEthernetCard, ethernetCardName string, network object.NetworkReference) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.SetupEthernetCard(ctx, card, ethernetCardName, network))
}

// LoadResourcePool implements vsphere.VSphereClient.
func (v *VCenter) LoadResourcePool(ctx context.Context) (*object.ResourcePool, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadResourcePool(ctx)
	return r, v.note(ctx, err)
}

// ResourcePoolRuntime implements vsphere.VSphereClient.
func (v *VCenter) ResourcePoolRuntime(ctx context.Context, pool *object.ResourcePool) (*types.ResourcePoolRuntimeInfo, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.ResourcePoolRuntime(ctx, pool)
	return r, v.note(ctx, err)
}

// LoadDatastore implements vsphere.VSphereClient.
func (v *VCenter) LoadDatastore(ctx context.Context, name string) (*object.Datastore, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadDatastore(ctx, name)
	return r, v.note(ctx, err)
}

// StartProgramInGuest implements vsphere.VSphereClient.
func (v *VCenter) StartProgramInGuest(ctx context.Context, vm *object.VirtualMachine, auth types.BaseGuestAuthentication, spec *types.GuestProgramSpec) (int64, error) {
	c, err := v.client()
	if err != nil {
		return 0, err
	}
	r, err := c.StartProgramInGuest(ctx, rebind(c, vm), auth, spec)
	return r, v.note(ctx, err)
}

// LoadVirtualMachineEvents implements vsphere.VSphereClient.
func (v *VCenter) LoadVirtualMachineEvents(ctx context.Context, vm *object.VirtualMachine, eventTypes ...string) ([]types.BaseEvent, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.LoadVirtualMachineEvents(ctx, rebind(c, vm), eventTypes...)
	return r, v.note(ctx, err)
}

// ProbeInventory implements vsphere.VSphereClient.
func (v *VCenter) ProbeInventory(ctx context.Context, pool *object.ResourcePool) ([]types.ManagedObjectReference, *types.ResourcePoolRuntimeInfo, error) {
	c, err := v.client()
	if err != nil {
		return nil, nil, err
	}
	refs, rt, err := c.ProbeInventory(ctx, pool)
	return refs, rt, v.note(ctx, err)
}

// RetrieveVirtualMachines implements vsphere.VSphereClient.
func (v *VCenter) RetrieveVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) ([]mo.VirtualMachine, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.RetrieveVirtualMachines(ctx, refs)
	return r, v.note(ctx, err)
}

// ResetVirtualMachineWatch implements vsphere.VSphereClient.
func (v *VCenter) ResetVirtualMachineWatch(ctx context.Context) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.ResetVirtualMachineWatch(ctx))
}

// WatchVirtualMachines implements vsphere.VSphereClient.
func (v *VCenter) WatchVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.WatchVirtualMachines(ctx, refs))
}

// UnwatchVirtualMachines implements vsphere.VSphereClient.
func (v *VCenter) UnwatchVirtualMachines(ctx context.Context, refs []types.ManagedObjectReference) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	return v.note(ctx, c.UnwatchVirtualMachines(ctx, refs))
}

// VirtualMachineChanges implements vsphere.VSphereClient. A watch started
// on a connection that has since been replaced is lost: the new client has
// none and says so (vsphere.ErrWatchLost).
func (v *VCenter) VirtualMachineChanges(ctx context.Context) ([]types.ObjectUpdate, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	r, err := c.VirtualMachineChanges(ctx)
	return r, v.note(ctx, err)
}
