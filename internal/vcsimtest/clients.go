package vcsimtest

import (
	"context"
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
)

// The hatchery's clients of a test's simulator: their configuration
// (verified TLS) and their construction, closed at the test's cleanup.

// TestRequestTimeout bounds each SOAP request of the test clients.
const TestRequestTimeout = 60 * time.Second

// ClientConfig is a verified-TLS (CAFile) configuration for this simulator,
// with TestPollInterval and TestRequestTimeout.
func (e *Env) ClientConfig() vcenter.Config {
	log := e.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return vcenter.Config{
		Endpoint:     e.Endpoint,
		User:         e.User,
		Password:     e.Password,
		CAFile:       e.CAFile,
		Datacenter:   e.Datacenter,
		ResourcePool: e.ResourcePool,
		Folder:       e.Folder,
		PollInterval: TestPollInterval,
		// The scope of Options.TemplateFolder (nil when unset).
		TemplateFolders: e.templateFolders(),
		// The simulator answers in milliseconds, but a -race run on a busy
		// 2-core machine can starve it for seconds: a test fails on what
		// it asserts, not on the production 15 s request bound.
		RequestTimeout: TestRequestTimeout,
		// One vCenter task at a time: govmomi's simulator v0.56.0 races
		// with itself when two tasks run at once (clones writing the same
		// folder, destroys the same datastore map), and the race detector
		// reports it against the test. The hatchery's decisions stay
		// concurrent; production's default is 8 tasks in flight.
		MaxConcurrentTasks: 1,
		Logger:             log,
	}
}

// NewClient builds another client (closed at cleanup); mutate, when not
// nil, edits the configuration first.
func (e *Env) NewClient(mutate func(*vcenter.Config)) *vcenter.Client {
	e.t.Helper()
	c, err := e.TryClient(mutate)
	if err != nil {
		e.t.Fatalf("vsphere client: %v", err)
	}
	return c
}

// TryClient is NewClient returning the constructor's error.
func (e *Env) TryClient(mutate func(*vcenter.Config)) (*vcenter.Client, error) {
	cfg := e.ClientConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := vcenter.Dial(e.ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.closeMu.Lock()
	e.closers = append(e.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(cctx)
	})
	e.closeMu.Unlock()
	return c, nil
}
