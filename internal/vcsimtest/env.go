// Package vcsimtest starts govmomi's in-process vSphere simulator (vcsim
// v0.56.0) for tests, shaped like the hatchery's production inventory: one
// datacenter, a resource pool, a datastore, the "VM Network" network and
// named templates. It works around the simulator's gaps:
// guest operations go to a recording FakeGuest instead of Docker, and VMs
// that power on become tools-running / guest-operations-ready.
//
// Every Env is private to its test (no package-level mutable state), so
// tests using it may run in parallel. Starting one costs ~0.35 s.
package vcsimtest

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// Names of the inventory every Env has (the simulator's VPX model).
const (
	DatacenterName   = "DC0"
	ResourcePoolPath = "/DC0/host/DC0_C0/Resources"
	DatastoreName    = "LocalDS_0"
	NetworkName      = "VM Network"
	FolderPath       = "/DC0/vm"
	CardName         = "vmxnet3"
	// DefaultTemplate is the template every Env has unless Options.Templates
	// says otherwise: debian12, 2 vCPU, 4096 MB.
	DefaultTemplate = "debian12"
)

// newServerMu serialises simulator creation across Envs (see Start) and
// ServeVPX. It is the package's only shared state and guards the
// simulator's, not ours.
var newServerMu sync.Mutex

// Default credentials. DefaultPassword has characters that break a URL
// built by concatenation, so every test exercises url.UserPassword.
const (
	DefaultUser          = "hatchery@vsphere.local"
	DefaultPassword      = "p@ss:w/rd%?"
	DefaultGuestUser     = "root"
	DefaultGuestPassword = "guest-secret"
)

// TestPollInterval is the poll period of clients built by Env: short, so
// waits finish fast while still going through the ticker.
const TestPollInterval = 20 * time.Millisecond

// Template describes a template created at Start (or by AddTemplate).
type Template struct {
	Name     string
	CPUs     int32 // 0 means 2
	MemoryMB int32 // 0 means 4096
	// Annotation is written in the template's Notes field ("" for none).
	Annotation string
	// GuestID is the template's guest id ("" means debian12_64Guest;
	// WindowsGuestID makes a Windows template, guestwin.go).
	GuestID string
	// Folder is where the template is created, an inventory path below the
	// VM folder (created when missing); "" is Options.TemplateFolder, else
	// the VM folder.
	Folder string
}

// Options shape an Env. The zero value is a useful default.
type Options struct {
	// User and Password are the vCenter credentials the simulator accepts
	// ("" means DefaultUser / DefaultPassword).
	User, Password string
	// Templates replaces the default template list ([debian12]); set
	// NoTemplates for none.
	Templates   []Template
	NoTemplates bool
	// GuestUser and GuestPassword are the guest credentials FakeGuest
	// accepts ("" means DefaultGuestUser / DefaultGuestPassword).
	GuestUser, GuestPassword string
	// ReadyDelay delays tools-running / guestOperationsReady after a power
	// on (0: ready when the power-on task completes).
	ReadyDelay time.Duration
	// ReadyJitter varies ReadyDelay at each power-on by a normal factor of
	// this coefficient of variation (stddev/mean; 0: none), as
	// LatencyModel does.
	ReadyJitter float64
	// ResumeDelay delays tools-running / guestOperationsReady after a
	// power on that resumes a suspended VM (0: ready when the task
	// completes). LatencyOptions sets the model's resume figure.
	ResumeDelay time.Duration
	// InstantReadyDelay delays tools-running / guestOperationsReady, and
	// the address the guestinfo gives, after an instant clone forked a
	// child (the guest's re-identification, instantclone.go; 0: when the
	// task completes). LatencyOptions sets the model's figure.
	InstantReadyDelay time.Duration
	// ClonePowerOnUnlocked makes a clone that powers its VM on do so
	// without holding the source template's lock, as vCenter does (see
	// clonePowerOn in clonepoweron.go); LatencyOptions sets it. Not with
	// SerialTasks: New refuses the two together.
	ClonePowerOnUnlocked bool
	// ForeignVMs adds that many powered-on VMs the hatchery does not own
	// (fast fixtures, see AddForeignVMs).
	ForeignVMs int
	// ForeignFolders, when set, are the folders (inventory paths below
	// the VM folder, created at Start) ForeignVMs are spread over, one
	// after the other, as other teams' folders of a shared vCenter; empty:
	// the datacenter's VM folder.
	ForeignFolders []string
	// Folder is the hatchery's folder (folderString), an inventory path
	// below the VM folder created at Start; "" is FolderPath, the VM
	// folder itself.
	Folder string
	// TemplateFolder is where the templates are created, an inventory path
	// below the VM folder created at Start; set, ClientConfig and Config
	// set it as the one templateFolders entry (the inventory's scope is then
	// Folder and TemplateFolder). "": templates in the VM folder, no
	// templateFolders.
	TemplateFolder string
	// Logger is given to Env.Client (nil: discard).
	Logger *slog.Logger
	// SerialTasks runs the simulator's clone, destroy, reconfigure,
	// rename and instant clone tasks one at a time, each from its call to
	// the end of its task: a workaround for races inside govmomi
	// v0.56.0's simulator between two such tasks, for tests with several
	// hatcheries under the race detector (serialtasks.go says which races). vCenter runs these
	// tasks concurrently: with the latency model's task delays
	// (ApplyTaskDelays), these tasks' delays add up instead of overlapping.
	SerialTasks bool
	// TaskRetention, when set, drops a task that long after it ended (tasks.go).
	TaskRetention time.Duration
	// Placements adds two clusters of two hosts each (ClusterA,
	// ClusterB) and two datastores each mounted on one cluster's hosts
	// (DatastoreA, DatastoreB; DatastoreName is mounted on every host),
	// for tests of several placements (placements.go). The templates stay
	// where they are (the DC0_C0 cluster, DatastoreName). It adds ~0.17 s
	// to the Env's start (0.35 s -> 0.53 s).
	Placements bool
	// NoStandaloneHost leaves out the simulator's standalone host (DC0_H0)
	// and its resource pool: the datacenter's one resource pool is then
	// the cluster's, and a finder's default resource pool resolves (for a
	// configuration without resourcePoolString, as upstream CDS
	// hatchery files are: internal/conformance/dropin_test.go).
	NoStandaloneHost bool
	// Runner, when set, runs what the hatchery launches in a guest as
	// processes on this machine and powers the VM off when they end
	// (GuestRunner, guestexec.go): for tests against a real CDS worker.
	Runner *GuestRunnerOptions
}

// Env is one running simulator and a ready client.
type Env struct {
	// Model is the simulator's model; Model.Map() is its registry.
	Model *simulator.Model
	// Server is the HTTPS server (127.0.0.1, self-signed certificate).
	Server *simulator.Server
	// URL is the SDK URL with the credentials in its user information.
	URL *url.URL
	// Endpoint is URL without credentials ("https://127.0.0.1:port/sdk").
	Endpoint string
	// User and Password are the vCenter credentials.
	User, Password string
	// CAFile is a PEM file holding the server's certificate.
	CAFile string
	// Names of the inventory (see the constants; Folder is
	// Options.Folder when set).
	Datacenter, ResourcePool, Datastore, Network, Folder string
	// TemplateFolder is Options.TemplateFolder ("" when unset).
	TemplateFolder string
	// Templates are the names of the templates created.
	Templates []string
	// Admin is a plain govmomi client (insecure TLS) for fixtures and
	// assertions; tests of the hatchery use Client.
	Admin *govmomi.Client
	// Client is a ready vcenter.Client built from ClientConfig().
	Client *vcenter.Client
	// Guest is the recording fake guest process manager.
	Guest *FakeGuest
	// CloudInit plays cloud-init in VMs booting with guestinfo userdata.
	CloudInit *FakeCloudInit
	// Runner runs the guests' launches (Options.Runner); nil otherwise.
	Runner *GuestRunner

	t      reporter
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	opts   Options
	ready  *readiness
	wg     sync.WaitGroup
	gate   *taskGate // Options.SerialTasks; nil otherwise
	bodies *cloneBodies
	fastMu sync.Mutex
	fastN  int

	hostReads  hostReads      // Env.HostReads
	privileges privileges     // Env.DenyPrivileges
	placements *placementHook // Env.FillDatastore, Env.FailClonesInto
	calls      callRules      // Env.RefuseCalls, Env.HoldCalls
	tempDirs   []string       // datastores of Options.Placements, removed at Close

	closeMu   sync.Mutex
	closers   []func() // clients built by TryClient, closed by Close
	closeOnce sync.Once
}

// reporter is the part of testing.TB the fixture methods use to fail.
type reporter interface {
	Helper()
	Fatalf(format string, args ...any)
}

// panicReporter fails an Env built by New: its fixture methods are for
// tests, and a failure there is a bug of the caller or of the harness.
type panicReporter struct{}

func (panicReporter) Helper() {}

func (panicReporter) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("vcsimtest: "+format, args...))
}

// Start runs a simulator for t and tears it down in t.Cleanup; a failure
// to start fails the test.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	e, err := New(o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.t = t
	t.Cleanup(e.Close)
	return e
}

// New runs a simulator outside a test (the demo); the caller must Close
// it. Fixture methods of an Env built by New panic where a test's would
// fail it.
func New(o Options) (*Env, error) {
	if o.User == "" {
		o.User = DefaultUser
	}
	if o.Password == "" {
		o.Password = DefaultPassword
	}
	if o.GuestUser == "" {
		o.GuestUser = DefaultGuestUser
	}
	if o.GuestPassword == "" {
		o.GuestPassword = DefaultGuestPassword
	}
	if o.Templates == nil && !o.NoTemplates {
		o.Templates = []Template{{Name: DefaultTemplate}}
	}
	if o.SerialTasks && o.ClonePowerOnUnlocked {
		// The queue follows the clone task put on the template; the
		// extension puts two there (the simulator's and its own).
		return nil, errors.New("vcsimtest options: SerialTasks and ClonePowerOnUnlocked do not go together")
	}

	m := simulator.VPX()
	m.Machine = 0 // no stock VMs: the datacenter holds what the test puts there
	if o.NoStandaloneHost {
		m.Host = 0
	}
	// vcsim v0.56.0 models share their default OptionManager settings, and
	// NewServer rewrites the "*.uri" ones: two Envs starting at once race.
	newServerMu.Lock()
	if err := m.Create(); err != nil {
		newServerMu.Unlock()
		return nil, fmt.Errorf("create simulator model: %w", err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(o.User, o.Password)}
	s := m.Service.NewServer()
	newServerMu.Unlock()
	caFile, err := s.CertificateFile()
	if err != nil {
		s.Close()
		m.Remove()
		return nil, fmt.Errorf("write simulator certificate: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	e := &Env{
		Model:        m,
		Server:       s,
		URL:          s.URL,
		User:         o.User,
		Password:     o.Password,
		CAFile:       caFile,
		Datacenter:   DatacenterName,
		ResourcePool: ResourcePoolPath,
		Datastore:    DatastoreName,
		Network:      NetworkName,
		Folder:       cmp.Or(o.Folder, FolderPath),
		t:            panicReporter{},
		ctx:          ctx,
		cancel:       cancel,
		opts:         o,

		TemplateFolder: o.TemplateFolder,
	}
	ep := *s.URL
	ep.User = nil
	e.Endpoint = ep.String()
	fail := func(err error) (*Env, error) {
		e.Close()
		return nil, err
	}

	if e.Guest, err = installFakeGuest(e, o.GuestUser, o.GuestPassword); err != nil {
		return fail(err)
	}
	if err := installFakeGuestFiles(e, e.Guest); err != nil {
		return fail(err)
	}
	e.privileges.denied = map[string]bool{}
	e.placements = newPlacementHook()
	// The placement hook comes before those that answer a clone
	// themselves (placementHook says why).
	// The collector and list view guards first: they only swap the
	// session's collector for one that destroys as vCenter does
	// (collectors.go), and its list views for ones that change under a
	// waiting filter as on vCenter (listview.go).
	listed := newListedRefs()
	hooks := []methodHook{(&collectorGuard{listed: listed}).handle, (&listViewGuard{listed: listed}).handle, e.calls.handle, e.hostReads.handle, e.privileges.handle, e.placements.handle, (&changeVersions{}).handle}
	e.bodies = newCloneBodies(m)
	if o.SerialTasks {
		e.gate = newTaskGate(m)
		hooks = append(hooks, e.gate.handle)
	}
	if o.ClonePowerOnUnlocked {
		hooks = append(hooks, (&clonePowerOn{env: e}).handle)
	}
	// Container views last: they answer CreateContainerView only after
	// the hooks that may refuse it (containerview.go).
	hooks = append(hooks, (&instantClone{env: e}).handle, (&containerViews{}).handle)
	installHooks(m, hooks...)
	e.CloudInit = newFakeCloudInit()
	if o.Runner != nil {
		if e.Runner, err = newGuestRunner(e, *o.Runner); err != nil {
			return fail(err)
		}
		e.Guest.runner, e.CloudInit.runner = e.Runner, e.Runner
	}
	e.ready = installReadiness(e, o.ReadyDelay)
	e.ready.jitter = o.ReadyJitter
	e.ready.resumeDelay = o.ResumeDelay
	e.ready.instantDelay = o.InstantReadyDelay

	admin, err := govmomi.NewClient(ctx, s.URL, true)
	if err != nil {
		return fail(fmt.Errorf("admin client: %w", err))
	}
	e.Admin = admin
	if e.Runner != nil {
		e.Runner.client = admin.Client
	}
	if o.Placements {
		if err := e.buildPlacements(ctx); err != nil {
			return fail(fmt.Errorf("placements: %w", err))
		}
	}
	for _, f := range append([]string{e.Folder, e.TemplateFolder}, o.ForeignFolders...) {
		if f == "" {
			continue
		}
		if _, err := e.ensureFolder(ctx, f); err != nil {
			return fail(fmt.Errorf("folder %q: %w", f, err))
		}
	}
	if err := e.createLockFolder(ctx); err != nil {
		return fail(fmt.Errorf("lock folder: %w", err))
	}

	for _, tpl := range o.Templates {
		if err := e.addTemplate(tpl); err != nil {
			return fail(err)
		}
	}
	if o.ForeignVMs > 0 && len(o.ForeignFolders) == 0 {
		e.AddForeignVMs("foreign-", o.ForeignVMs)
	}
	for i, f := range o.ForeignFolders {
		// An even share to each folder, the remainder to the first ones.
		n := o.ForeignVMs / len(o.ForeignFolders)
		if i < o.ForeignVMs%len(o.ForeignFolders) {
			n++
		}
		if n > 0 {
			e.AddForeignVMsIn(f, "foreign-", n)
		}
	}
	if e.Client, err = e.TryClient(nil); err != nil {
		return fail(fmt.Errorf("vsphere client: %w", err))
	}
	e.startReaper(o.TaskRetention)
	return e, nil
}

// Close stops the simulator: it ends Context, joins the goroutines the Env
// started, closes the clients it built, the server and the model. It is
// idempotent; Start calls it at the test's cleanup.
func (e *Env) Close() {
	e.closeOnce.Do(func() {
		e.cancel()
		if e.Runner != nil {
			e.Runner.close()
		}
		e.wg.Wait()
		e.closeMu.Lock()
		cs := e.closers
		e.closers = nil
		e.closeMu.Unlock()
		for i := len(cs) - 1; i >= 0; i-- {
			cs[i]()
		}
		if e.Admin != nil {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = e.Admin.Logout(cctx)
			ccancel()
		}
		e.Server.Close()
		e.Model.Remove()
		for _, d := range e.tempDirs {
			_ = os.RemoveAll(d)
		}
	})
}

// Config returns a hatchery configuration pointing at this simulator:
// connection, TLS (CAFile) and placement fields only.
func (e *Env) Config() *config.Config {
	return &config.Config{
		User:               e.User,
		Endpoint:           e.Endpoint,
		Password:           e.Password,
		CAFile:             e.CAFile,
		DatacenterString:   e.Datacenter,
		DatastoreString:    e.Datastore,
		NetworkString:      e.Network,
		ResourcePoolString: e.ResourcePool,
		FolderString:       e.Folder,
		CardName:           CardName,
		TemplateFolders:    e.templateFolders(),
	}
}

// templateFolders is the templateFolders setting of Options.TemplateFolder:
// nil when unset.
func (e *Env) templateFolders() []string {
	if e.TemplateFolder == "" {
		return nil
	}
	return []string{e.TemplateFolder}
}

// ensureFolder returns the folder at path (an inventory path below the
// datacenter's VM folder), creating it and any missing parent.
func (e *Env) ensureFolder(ctx context.Context, path string) (*object.Folder, error) {
	finder := newFinder(e.Admin.Client)
	dc, err := finder.Datacenter(ctx, e.Datacenter)
	if err != nil {
		return nil, err
	}
	finder.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, err
	}
	root := folders.VmFolder.InventoryPath
	if path != root && !strings.HasPrefix(path, root+"/") {
		return nil, fmt.Errorf("%q is not below the VM folder %q", path, root)
	}
	cur := folders.VmFolder
	at := root
	for _, seg := range strings.Split(strings.TrimPrefix(path[len(root):], "/"), "/") {
		if seg == "" {
			continue
		}
		at += "/" + seg
		f, err := finder.Folder(ctx, at)
		if err != nil {
			if f, err = cur.CreateFolder(ctx, seg); err != nil {
				return nil, err
			}
			f.InventoryPath = at
		}
		cur = f
	}
	return cur, nil
}

// Context ends at Close (for an Env from Start, when the test ends).
func (e *Env) Context() context.Context { return e.ctx }

// SimContext returns a fresh simulator context for registry access (each
// goroutine must use its own: lock ownership is per context).
func (e *Env) SimContext() *simulator.Context {
	return &simulator.Context{Context: e.ctx, Map: e.Model.Map(), Session: e.Model.Service.Context.Session}
}

// AddTemplate creates a template through the API: pvscsi controller, a
// disk, a vmxnet3 NIC on "VM Network", CPUs/MemoryMB, then MarkAsTemplate.
func (e *Env) AddTemplate(tpl Template) {
	e.t.Helper()
	if err := e.addTemplate(tpl); err != nil {
		e.t.Fatalf("%v", err)
	}
}

// addTemplate is AddTemplate returning its error.
func (e *Env) addTemplate(tpl Template) error {
	if tpl.CPUs == 0 {
		tpl.CPUs = 2
	}
	if tpl.MemoryMB == 0 {
		tpl.MemoryMB = 4096
	}
	if err := e.createTemplate(e.ctx, tpl); err != nil {
		return fmt.Errorf("create template %q: %w", tpl.Name, err)
	}
	e.Templates = append(e.Templates, tpl.Name)
	return nil
}

// createLockFolder creates the folder of the static-IP locks
// (vcenter.LockFolderName) in the VM folder, as a hatchery's first lock
// does once (vcenter.Client.CreateLock), before any clone. It works around
// a data race of the simulator, not a vCenter behaviour: govmomi v0.56.0's
// CloneVM_Task (simulator/virtual_machine.go, the task function of
// CloneVMTask) reads its destination folder's children holding only the
// source VM's lock, while CreateFolder in that folder appends to them
// holding the folder's lock, so a folder created beside a running clone is
// reported by the race detector. The locks themselves are created inside
// this folder, which no clone reads. TestVcsimLockFolderCreatedOnce
// (internal/vcenter) removes it to cover the creation.
func (e *Env) createLockFolder(ctx context.Context) error {
	finder := newFinder(e.Admin.Client)
	dc, err := finder.Datacenter(ctx, e.Datacenter)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	vmFolder, err := finder.Folder(ctx, e.Folder)
	if err != nil {
		return err
	}
	_, err = vmFolder.CreateFolder(ctx, vcenter.LockFolderName)
	return err
}

func (e *Env) createTemplate(ctx context.Context, tpl Template) error {
	c := e.Admin.Client
	finder := newFinder(c)
	dc, err := finder.Datacenter(ctx, e.Datacenter)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	folder, err := e.ensureFolder(ctx, cmp.Or(tpl.Folder, e.TemplateFolder, FolderPath))
	if err != nil {
		return err
	}
	pool, err := finder.ResourcePool(ctx, e.ResourcePool)
	if err != nil {
		return err
	}
	ds, err := finder.Datastore(ctx, e.Datastore)
	if err != nil {
		return err
	}
	netw, err := finder.Network(ctx, e.Network)
	if err != nil {
		return err
	}
	backing, err := netw.EthernetCardBackingInfo(ctx)
	if err != nil {
		return err
	}

	var devices object.VirtualDeviceList
	scsi, err := devices.CreateSCSIController("pvscsi")
	if err != nil {
		return err
	}
	devices = append(devices, scsi)
	ctrl, err := devices.FindSCSIController("")
	if err != nil {
		return err
	}
	disk := devices.CreateDisk(ctrl, ds.Reference(), "")
	disk.CapacityInKB = 10 * 1024 * 1024
	devices = append(devices, disk)
	nic, err := object.EthernetCardTypes().CreateEthernetCard(CardName, backing)
	if err != nil {
		return err
	}
	devices = append(devices, nic)
	changes, err := devices.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		if ch.GetVirtualDeviceConfigSpec().Device == disk {
			ch.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	guestID := tpl.GuestID
	if guestID == "" {
		guestID = "debian12_64Guest"
	}
	spec := types.VirtualMachineConfigSpec{
		Name:         tpl.Name,
		GuestId:      guestID,
		NumCPUs:      tpl.CPUs,
		MemoryMB:     int64(tpl.MemoryMB),
		Annotation:   tpl.Annotation,
		Files:        &types.VirtualMachineFileInfo{VmPathName: "[" + e.Datastore + "]"},
		DeviceChange: changes,
	}
	task, err := folder.CreateVM(ctx, spec, pool, nil)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return err
	}
	vm := object.NewVirtualMachine(c, info.Result.(types.ManagedObjectReference))
	return vm.MarkAsTemplate(ctx)
}
