package vcenter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Timeouts and intervals of the govmomi adapter. Each one bounds a wait so
// that a hung vCenter can never block a hatchery loop forever.
const (
	// DefaultRequestTimeout bounds every SOAP request to 15 s
	// (docs/design.md#timeouts). Waits long-poll for at most
	// waitLongPollMax (and half this bound), so no single request needs
	// longer.
	DefaultRequestTimeout = 15 * time.Second

	// cloneTaskTimeout bounds a clone task: a full clone copies the
	// template's disks on the datastore, which takes minutes on a busy
	// vCenter; ten minutes is far past a healthy clone and still frees the
	// job for another spawn attempt.
	cloneTaskTimeout = 10 * time.Minute
	// powerTaskTimeout bounds power on/off: the hypervisor acts at once;
	// two minutes covers a queued host.
	powerTaskTimeout = 2 * time.Minute
	// suspendTaskTimeout bounds a suspend: the hypervisor writes the
	// guest's memory to the datastore, which for a large VM on a busy
	// datastore takes longer than a power off.
	suspendTaskTimeout = 5 * time.Minute
	// reconfigureTaskTimeout bounds rename and reconfigure: metadata changes
	// on the VM's config file.
	reconfigureTaskTimeout = 2 * time.Minute
	// destroyTaskTimeout bounds destroy: it deletes the VM's files.
	destroyTaskTimeout = 5 * time.Minute

	// DefaultPollInterval is how often a wait re-reads its object while
	// the wait collector gives it no notification (its filter being made,
	// the collector lost; vim/waits_loop.go); with notifications it
	// re-reads every waitFallbackFactor intervals. One second keeps a
	// polling wait's load at one small request per second per object.
	DefaultPollInterval = time.Second
	// DefaultKeepAliveInterval is the idle time between session keep-alive
	// requests; vCenter expires idle sessions after ~30 minutes.
	DefaultKeepAliveInterval = 5 * time.Minute

	// maxIdleConnsPerHost is how many idle connections to vCenter the
	// client keeps for reuse. Go's default keeps 2 and closes the others,
	// so while a burst of spawns polls tasks and guests at once every
	// request beyond the second opened a new connection and paid a TLS
	// handshake (round trips, and RSA signing on vCenter). 64 covers a
	// burst's concurrent requests (a task slot each, and the readiness
	// polls of the VMs booting); an idle connection still closes after
	// the transport's idle timeout (90 s).
	maxIdleConnsPerHost = 64

	// reloginOutageWindow is how long after vCenter answered again a
	// re-login is taken as part of that outage (a restarted vCenter
	// knows no session) and logged at DEBUG only: the outage's two lines
	// told the operator already. A minute covers the calls of a burst
	// that were waiting for vCenter; a session that expires later is
	// logged as such.
	reloginOutageWindow = time.Minute
)

// Config is what Dial needs to reach vCenter.
type Config struct {
	// Endpoint is a host, host:port or full URL ("https://vc.example/sdk").
	// User information in the URL is ignored: User and Password are used.
	Endpoint string
	User     string
	// Password is a secret: it never appears in an error or a log.
	Password string
	// Insecure switches TLS certificate verification off (opt-in).
	Insecure bool
	// CAFile is a PEM file (or a list separated by the OS path list
	// separator) of roots trusted for vCenter's certificate.
	CAFile string

	// Datacenter is the datacenter's name or inventory path; "" is the
	// default datacenter (an error when there are several).
	Datacenter string
	// ResourcePool is resourcePoolString: inventory path or name; "" is the
	// datacenter's default pool.
	ResourcePool string
	// Folder is folderString: inventory path or name; "" is the
	// datacenter's VM folder (in the scope: its top level only).
	Folder string
	// TemplateFolders is templateFolders: inventory paths of VM folders.
	// Set, they are the scope's template folders (subtrees included);
	// empty, the template folders are derived (govmomi_scope.go).
	TemplateFolders []string
	// Placements are the [[placements]] entries' own keys, by index (nil
	// without entries): the lookups of their values report problems
	// under the entry's key path (PlacementKeys), CheckTopology checks
	// each, and their folders are in the inventory's scope
	// (govmomi_scope.go).
	Placements []PlacementKeys

	// RequestTimeout bounds each SOAP request; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// TaskTimeoutScale multiplies the named task timeouts; 0 means 1. Tests
	// may shorten them.
	TaskTimeoutScale float64
	// PollInterval is the period of property polls in waits; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// KeepAliveInterval is the session keep-alive period; 0 means
	// DefaultKeepAliveInterval.
	KeepAliveInterval time.Duration
	// MaxConcurrentTasks bounds vCenter tasks in flight (clone, power,
	// rename, reconfigure, destroy); 0 is unbounded.
	MaxConcurrentTasks int
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger

	// DialBackoffMin and DialBackoffMax bound Run's wait between two
	// connection attempts: from the first, doubling, up to the second
	// (0: DefaultDialBackoffMin, DefaultDialBackoffMax).
	DialBackoffMin, DialBackoffMax time.Duration
	// LoginRefusedRetry is Run's wait after vCenter refused the
	// credentials (IsLoginRefused) instead of the dial back-off
	// (0: DefaultLoginRefusedRetry).
	LoginRefusedRetry time.Duration
	// OnConnect, when set, is called once the client first connected.
	OnConnect func()
}

// Default back-off of Run between two connection attempts: vCenter
// restarting takes minutes, so a retry every 30 s at most is prompt enough
// and costs nothing meanwhile.
const (
	DefaultDialBackoffMin = time.Second
	DefaultDialBackoffMax = 30 * time.Second
)

// DefaultLoginRefusedRetry is Run's wait after vCenter refused the
// credentials: a wrong password is not an outage and does not mend by
// itself, and every refused login counts towards the account's lockout
// under a lockout policy (vCenter's own locks an account after a few
// failures within minutes; a directory's may lock it until an
// administrator unlocks it). Retried every 30 s, the service account was
// locked within minutes; at one attempt per 15 minutes no usual policy's
// threshold is reached, and an account unlocked or a password reset on
// the vCenter side is still picked up (docs/troubleshooting.md).
const DefaultLoginRefusedRetry = 15 * time.Minute

// Client implements Port with govmomi. It is safe for concurrent use. It
// exists before vCenter answers (New): until it first connected (Connect,
// or Run in the background) every Port call fails at once with
// vctypes.ErrNotConnected. Once connected it keeps its one session alive
// (keep-alive every KeepAliveInterval, re-login once on NotAuthenticated),
// so it never needs a second connection; it bounds every SOAP request by
// RequestTimeout and every task by a named timeout, counts SOAP requests
// and bytes per method (Stats) and notes whether vCenter answers (Status).
// Close logs out.
type Client struct {
	cfg   Config
	log   *slog.Logger
	host  string // the endpoint's host[:port], never its user information
	ready chan struct{}

	// up is set once the connection fields below are (they are written
	// once, before up, and read only after up was seen set).
	up     atomic.Bool
	closed atomic.Bool

	stateMu     sync.Mutex
	connecting  bool      // a Connect is under way
	dialErr     error     // the last connection error while not connected
	attempts    int       // connection attempts so far
	unreachable error     // the last transport error, nil after an answer
	since       time.Time // when unreachable started
	backAt      time.Time // when vCenter last answered again after an outage
	renewed     bool      // the client logged in again during the current outage

	vim   *vim25.Client
	sm    *session.Manager
	pc    *property.Collector
	dc    *object.Datacenter
	ka    *keepalive.HandlerSOAP
	rl    *reloginRoundTripper
	stats *soapStats
	sem   chan struct{} // nil when unbounded
	// placement memoises LoadFolder, LoadResourcePool, LoadDatastore and
	// LoadNetwork (placementCacheTTL): resolving them walks the inventory.
	placement *placementCache
	// templates memoises what clones read of their templates (devices
	// and snapshots, templateDevicesTTL): LoadTemplate, CloneVirtualMachine.
	templates *vim.TemplateDevices

	// PollInterval is the period of property polls in waits. Tests may
	// shorten it before Connect, which hands it to the collector.
	PollInterval time.Duration

	taskScale float64

	// col is the property-collector side (internal/vcenter/vim's
	// Collector: the scope's views and listing, the VM change watch, the
	// probe, the wait collector), made once connected.
	col *vim.Collector

	// guestPM is the guest operations process manager of the session
	// guestPMGen (zero until read): guestProcessManager.
	guestPMMu  sync.Mutex
	guestPM    types.ManagedObjectReference
	guestPMGen int64

	closeOnce sync.Once
}

// New returns a client that is not connected yet: every Port call fails
// with vctypes.ErrNotConnected until Connect (or Run) succeeds. It does no I/O.
func New(cfg Config) *Client {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.KeepAliveInterval <= 0 {
		cfg.KeepAliveInterval = DefaultKeepAliveInterval
	}
	if cfg.TaskTimeoutScale <= 0 {
		cfg.TaskTimeoutScale = 1
	}
	if cfg.DialBackoffMin <= 0 {
		cfg.DialBackoffMin = DefaultDialBackoffMin
	}
	if cfg.DialBackoffMax < cfg.DialBackoffMin {
		cfg.DialBackoffMax = max(DefaultDialBackoffMax, cfg.DialBackoffMin)
	}
	if cfg.LoginRefusedRetry <= 0 {
		cfg.LoginRefusedRetry = DefaultLoginRefusedRetry
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		cfg:          cfg,
		log:          log,
		host:         endpointHost(cfg.Endpoint),
		ready:        make(chan struct{}),
		stats:        newSOAPStats(),
		PollInterval: cfg.PollInterval,
		taskScale:    cfg.TaskTimeoutScale,
		placement:    newPlacementCache(log),
		templates:    vim.NewTemplateDevices(time.Now),
	}
	if cfg.MaxConcurrentTasks > 0 {
		c.sem = make(chan struct{}, cfg.MaxConcurrentTasks)
	}
	return c
}

// Dial returns a client connected to vCenter (New, then Connect). The
// password never appears in its errors.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	c := New(cfg)
	if err := c.Connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Connect connects and logs in to vCenter and resolves the datacenter, in
// one attempt; nil when already connected. Its error is also kept for
// Status. The password never appears in its errors.
func (c *Client) Connect(ctx context.Context) error {
	c.stateMu.Lock()
	if c.up.Load() {
		c.stateMu.Unlock()
		return nil
	}
	if c.closed.Load() {
		c.stateMu.Unlock()
		return fmt.Errorf("%w (%s): closed", vctypes.ErrNotConnected, c.host)
	}
	if c.connecting {
		c.stateMu.Unlock()
		return fmt.Errorf("%w (%s): still connecting", vctypes.ErrNotConnected, c.host)
	}
	c.connecting = true
	c.stateMu.Unlock()

	s, err := c.connect(ctx)

	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.connecting = false
	c.attempts++
	if err == nil && c.closed.Load() {
		// Close raced the connection: never leak the session.
		c.stateMu.Unlock()
		s.close(ctx, c.log)
		c.stateMu.Lock()
		err = fmt.Errorf("%w (%s): closed", vctypes.ErrNotConnected, c.host)
	}
	if err != nil {
		c.dialErr = err
		return err
	}
	c.vim, c.sm, c.pc, c.dc, c.ka, c.rl = s.vim, s.sm, s.pc, s.dc, s.ka, s.rl
	c.col = vim.NewCollector(vim.CollectorConfig{
		Vim:            s.vim,
		PC:             s.pc,
		Datacenter:     s.dc,
		Generation:     s.rl.generation,
		Roots:          c.scopeRoots,
		PollInterval:   c.PollInterval,
		RequestTimeout: c.cfg.RequestTimeout,
		Log:            c.log,
	})
	c.dialErr = nil
	c.up.Store(true)
	close(c.ready)
	return nil
}

// conn is what one successful connection attempt made.
type conn struct {
	vim *vim25.Client
	sm  *session.Manager
	pc  *property.Collector
	dc  *object.Datacenter
	ka  *keepalive.HandlerSOAP
	rl  *reloginRoundTripper
}

// close logs the session out, bounded by ctx.
func (s *conn) close(ctx context.Context, log *slog.Logger) {
	s.rl.closed.Store(true)
	if err := s.sm.Logout(ctx); err != nil {
		log.Warn("log out of vcenter", logkey.Err, err)
	}
	s.ka.Stop()
	s.vim.CloseIdleConnections()
}

// connect makes one connection attempt.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	cfg := c.cfg
	u, err := endpointURL(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	sc := soap.NewClient(u, cfg.Insecure)
	sc.DefaultTransport().MaxIdleConnsPerHost = maxIdleConnsPerHost
	if cfg.CAFile != "" {
		if err := sc.SetRootCAs(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("load vcenter ca file %q: %w", cfg.CAFile, err)
		}
	}
	sc.Client.Transport = &countingTransport{next: sc.Client.Transport, stats: c.stats}
	metered := &meteredRoundTripper{next: sc, timeout: cfg.RequestTimeout}

	// vim25.NewClient needs the soap.Client itself to set the namespace and
	// version; its one request is bounded and labelled here.
	rctx, cancel := context.WithTimeout(withSOAPMethod(ctx, "RetrieveServiceContent"), cfg.RequestTimeout)
	vc, err := vim25.NewClient(rctx, sc)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("connect to vcenter %s: %w", u.Host, err)
	}
	ka := keepalive.NewHandlerSOAP(metered, cfg.KeepAliveInterval, nil)
	rl := &reloginRoundTripper{
		next:     ka,
		sm:       *vc.ServiceContent.SessionManager,
		user:     cfg.User,
		password: cfg.Password,
		log:      c.log,
		quiet:    c.reloginQuiet,
	}
	// Outermost: every answer or transport failure of a call is noted
	// for Status (the keep-alive's own requests are not calls).
	vc.RoundTripper = &reachabilityRoundTripper{next: rl, c: c}
	s := &conn{vim: vc, sm: session.NewManager(vc), pc: property.DefaultCollector(vc), ka: ka, rl: rl}
	if err := s.sm.Login(ctx, url.UserPassword(cfg.User, cfg.Password)); err != nil {
		ka.Stop()
		return nil, fmt.Errorf("log in to vcenter %s as %q: %w", u.Host, cfg.User, err)
	}
	dc, err := vim.FindDatacenter(ctx, vc, u.Host, cfg.Datacenter, c.log)
	if err != nil {
		s.close(context.WithoutCancel(ctx), c.log)
		return nil, err
	}
	s.dc = dc
	c.log.Info("connected to vcenter", "endpoint", u.Host, "user", cfg.User, "datacenter", dc.InventoryPath)
	return s, nil
}

// find returns a finder scoped to the datacenter. A govmomi Finder caches
// the datacenter's folders lazily and is not safe for concurrent use, so
// each call gets its own; the lookups it serves are rare (placement is
// cached, VMs come from the inventory).
func (c *Client) find() *find.Finder {
	f := find.NewFinder(c.vim, true)
	if c.dc != nil {
		f.SetDatacenter(c.dc)
	}
	return f
}

// endpointURL builds the SDK URL from a host, host:port or URL. It never
// includes credentials: they are passed to Login (url.UserPassword escapes
// any character). Its errors never echo the endpoint's user information.
func endpointURL(endpoint string) (*url.URL, error) {
	endpoint = strings.TrimSpace(endpoint)
	if endpoint == "" {
		return nil, errors.New("vcenter endpoint is empty")
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, user info included
		}
		return nil, fmt.Errorf("parse vcenter endpoint: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		// Validate refuses http for a configuration (the password would
		// travel in clear); the adapter still speaks it to test servers.
		return nil, fmt.Errorf("vcenter endpoint scheme %q: want https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("vcenter endpoint has no host")
	}
	u.User = nil
	if u.Path == "" || u.Path == "/" {
		u.Path = vim25.Path
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// Datacenter returns the datacenter the client works in; nil before the
// connection.
func (c *Client) Datacenter() *object.Datacenter {
	if !c.up.Load() {
		return nil
	}
	return c.dc
}

// Vim25 returns the underlying govmomi client (for tests and tools; the
// hatchery reaches vCenter only through Port); nil before the connection.
func (c *Client) Vim25() *vim25.Client {
	if !c.up.Load() {
		return nil
	}
	return c.vim
}

// Relogins returns how many times the client logged in again after vCenter
// answered NotAuthenticated.
func (c *Client) Relogins() int64 {
	if !c.up.Load() {
		return 0
	}
	return c.rl.relogins.Load()
}

// Close stops the wait collector's goroutine (destroying its collector,
// which ends its long poll, and cancelling the requests of its polls in
// flight: vim.Collector.Close), destroys the VM change watch's collector
// and the container view (best effort), stops the keep-alive and logs
// out; it is bounded by ctx and by the request timeout. Calls after the first do nothing; Port calls
// after it fail with vctypes.ErrNotConnected. Call it after every user stopped.
func (c *Client) Close(ctx context.Context) {
	c.closeOnce.Do(func() {
		c.stateMu.Lock()
		c.closed.Store(true)
		up := c.up.Load()
		c.stateMu.Unlock()
		if !up {
			return
		}
		c.col.Close(ctx)
		(&conn{vim: c.vim, sm: c.sm, ka: c.ka, rl: c.rl}).close(ctx, c.log)
	})
}

// scaled returns a named task timeout times TaskTimeoutScale.
func (c *Client) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.taskScale)
}

// acquire takes a task slot (MaxConcurrentTasks) or fails when ctx ends.
func (c *Client) acquire(ctx context.Context) (func(), error) {
	if c.sem == nil {
		return func() {}, nil
	}
	select {
	case c.sem <- struct{}{}:
		return func() { <-c.sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a vcenter task slot: %w", ctx.Err())
	}
}
