package hatchery

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// statusLine is one mutable component of the framework's status.
type statusLine struct {
	mu     sync.Mutex
	status string
	value  string
}

func (l *statusLine) set(status, value string) {
	l.mu.Lock()
	l.status, l.value = status, value
	l.mu.Unlock()
}

func (l *statusLine) get() (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status, l.value
}

// state is what the loops report for /mon/status and heartbeats.
type state struct {
	signIn    statusLine
	heartbeat statusLine
	// queueV1 and queueV2 are the last poll of each queue, apart so a
	// failing V2 poll is not hidden by a working V1 one.
	queueV1 statusLine
	queueV2 statusLine
}

// attemptsRetention is how long a job's spawn attempts are remembered
// after its last attempt once it left the queue. A job whose worker never
// registers leaves the queue while booked and comes back when its VM is
// reclaimed (workerRegistrationTTL later): its count must survive that.
const attemptsRetention = 24 * time.Hour

// attemptCounter counts spawn attempts per job: V1 jobs by their int64
// id, V2 run jobs by their string id. Every attempt counts, a spawn that
// succeeded included: its worker may still never take the job.
type attemptCounter[K comparable] struct {
	mu   sync.Mutex
	n    map[K]int
	last map[K]time.Time
}

func (a *attemptCounter[K]) init() {
	a.n = map[K]int{}
	a.last = map[K]time.Time{}
}

// add records an attempt at now and returns the count.
func (a *attemptCounter[K]) add(id K, now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n[id]++
	a.last[id] = now
	return a.n[id]
}

// undo takes back the last attempt recorded for id (a spawn that turned
// out not to be one: the backend's fault, or refused before trying) and
// returns the count.
func (a *attemptCounter[K]) undo(id K) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[id] > 0 {
		a.n[id]--
	}
	return a.n[id]
}

// count returns the attempts recorded for id.
func (a *attemptCounter[K]) count(id K) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[id]
}

func (a *attemptCounter[K]) forget(id K) {
	a.mu.Lock()
	delete(a.n, id)
	delete(a.last, id)
	a.mu.Unlock()
}

// prune forgets the jobs neither queued nor being processed (keep tells)
// whose last attempt is older than attemptsRetention.
func (a *attemptCounter[K]) prune(now time.Time, keep func(id K) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.n {
		if !keep(id) && now.Sub(a.last[id]) >= attemptsRetention {
			delete(a.n, id)
			delete(a.last, id)
		}
	}
}

// modelsCache caches GET /worker/model/enabled for Intervals.Register.
// Its mutex is held across the API call on purpose: concurrent starters
// wait for one fetch instead of each asking.
type modelsCache struct {
	mu      sync.Mutex
	models  []sdk.Model
	fetched time.Time
}

// modelsV1 returns the enabled V1 models, fetched at most once per
// Intervals.Register (force fetches now). On error the previous list is
// returned if any.
func (f *Framework) modelsV1(ctx context.Context, force bool) ([]sdk.Model, error) {
	c := &f.models
	c.mu.Lock()
	defer c.mu.Unlock()
	if !force && !c.fetched.IsZero() && f.now().Sub(c.fetched) < f.iv.Register {
		return c.models, nil
	}
	ms, err := f.client.WorkerModelsEnabled(ctx)
	if err != nil {
		if c.models != nil {
			if ctx.Err() != nil {
				// The request was cut by the shutdown, not refused by
				// the API: nothing to warn about.
				f.log.Info("list worker models cut (shutting down), using cached list", logkey.Err, err)
			} else {
				f.log.Warn("list worker models failed, using cached list", logkey.Err, err)
			}
			return c.models, nil
		}
		return nil, fmt.Errorf("list worker models: %w", err)
	}
	c.models, c.fetched = ms, f.now()
	return ms, nil
}

// WorkersStatusValue renders the worker count: "N/max" or "N/unlimited".
func WorkersStatusValue(n, maxWorker int) string {
	if maxWorker <= 0 {
		return fmt.Sprintf("%d/unlimited", n)
	}
	return fmt.Sprintf("%d/%d", n, maxWorker)
}

// statusLines is the whole status: the framework's lines, the hatchery's
// Status() and ExtraStatus.
func (f *Framework) statusLines(ctx context.Context) []sdk.MonitoringStatusLine {
	line := func(component, status, value string) sdk.MonitoringStatusLine {
		return sdk.MonitoringStatusLine{Status: status, Component: component, Value: value, Type: "hatchery", Service: f.cfg.Name, Hostname: f.hostname}
	}
	var lines []sdk.MonitoringStatusLine
	lines = append(lines, line("Version", sdk.MonitoringStatusOK, f.version))
	s, v := f.st.signIn.get()
	lines = append(lines, line("API", s, v))
	s, v = f.st.heartbeat.get()
	lines = append(lines, line("Heartbeat", s, v))
	if f.cfg.API.Token != "" {
		s, v = f.st.queueV1.get()
		lines = append(lines, line("Queue V1", s, v))
	}
	if f.cfg.API.TokenV2 != "" {
		s, v = f.st.queueV2.get()
		lines = append(lines, line("Queue V2", s, v))
	}
	lines = append(lines, f.cdnStatusLine(line))
	pool := f.Pool()
	ws := sdk.MonitoringStatusOK
	mw := f.pool.Limits().MaxWorker // a reload may change it (SetMaxWorker)
	if mw > 0 && len(pool) >= mw {
		ws = sdk.MonitoringStatusWarn
	}
	lines = append(lines, line("Workers", ws, WorkersStatusValue(len(pool), mw)))
	lines = append(lines, line("Spawns in flight", sdk.MonitoringStatusOK,
		fmt.Sprintf("%d/%d", f.pool.SpawnsInFlight(), f.cfg.Provision.MaxConcurrentProvisioning)))
	// Refusals are normal operation (capacity, other hatcheries' jobs):
	// the line says why jobs wait or are passed over, never alerts.
	lines = append(lines, line("Job refusals", sdk.MonitoringStatusOK, f.refusals.value()))
	if l, ok := f.drainStatusLine(line); ok {
		lines = append(lines, l)
	}
	lines = append(lines, f.h.Status(ctx)...)
	if f.extra != nil {
		lines = append(lines, f.extra(ctx)...)
	}
	// The hatchery's and the extra lines name their component only; every
	// line of this status carries the same type, service and host.
	for i := range lines {
		if lines[i].Type == "" {
			lines[i].Type, lines[i].Service, lines[i].Hostname = "hatchery", f.cfg.Name, f.hostname
		}
	}
	return lines
}

// cdnStatusLine is the CDN status line: the HTTP URL and the TCP log
// address given to workers, WARN before they are resolved and without a
// TCP address (workers cannot send their logs; V1 jobs never end).
func (f *Framework) cdnStatusLine(line func(component, status, value string) sdk.MonitoringStatusLine) sdk.MonitoringStatusLine {
	if f.cdn.Load() == nil {
		return line("CDN", sdk.MonitoringStatusWarn, "not resolved yet")
	}
	c := f.workerCDN()
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	v := "http " + or(c.HTTP, "none") + ", tcp " + or(c.TCP, "none")
	if c.TCP != "" && c.TCPWithTLS {
		v += " (tls)"
	}
	if c.TCP == "" {
		return line("CDN", sdk.MonitoringStatusWarn, v+": no log address for workers, set commonConfiguration.cdn.tcp.url")
	}
	return line("CDN", sdk.MonitoringStatusOK, v)
}
