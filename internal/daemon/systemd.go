package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/sdnotify"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// systemd integration (docs/install.md, "systemd"): READY=1 once signed in
// to the CDS API and the first inventory is read, STATUS= lines at each
// change of state, RELOADING=1 / READY=1 around a reload, STOPPING=1 at
// shutdown, and a watchdog fed only while the loops that must stay alive
// move.

// Default limits of the watchdog: how long a loop may go without moving
// before the watchdog is no longer fed. Far above a healthy loop's period,
// so that only a loop that hangs stops the feeding.
const (
	// DefaultWatchdogSpawnLimit bounds how long every starter may stay in
	// one job: longer than any spawn's own bounds (a Windows guest's
	// readiness alone may take 28 min, docs/windows.md).
	DefaultWatchdogSpawnLimit = 45 * time.Minute
	// DefaultWatchdogLoopSlack is added to four periods of the queue poll,
	// inventory refresh and cleanup loops: a pass may wait on vCenter or
	// the API (each request bounded) and, for the queue poll, on starters.
	DefaultWatchdogLoopSlack = 15 * time.Minute
)

// notifier sends systemd notifications and logs the first failure only.
type notifier struct {
	n      *sdnotify.Notifier
	log    *slog.Logger
	failed sync.Once
	// ready is set once READY=1 was sent: a reload sends it again only
	// then (a reload before it must not say the service is up).
	ready atomic.Bool
}

// reloading sends RELOADING=1 with a status once READY=1 was sent, the
// status only before.
func (s *notifier) reloading() {
	if s == nil {
		return
	}
	if !s.ready.Load() {
		s.send(sdnotify.Status("reloading the configuration"))
		return
	}
	s.send(sdnotify.Reloading, sdnotify.Status("reloading the configuration"))
}

// up sends READY=1 with status the first time, and again after a reload
// (again), once it was sent; before that, status only.
func (s *notifier) up(status string, again bool) {
	if s == nil {
		return
	}
	if again && !s.ready.Load() {
		s.send(sdnotify.Status(status))
		return
	}
	s.ready.Store(true)
	s.send(sdnotify.Ready, sdnotify.Status(status))
}

// send sends msgs as one notification; nothing without a socket.
func (s *notifier) send(msgs ...string) {
	if s == nil || s.n == nil {
		return
	}
	if err := s.n.Send(msgs...); err != nil {
		s.failed.Do(func() { s.log.Error("systemd notification failed", logkey.Err, err) })
	}
}

// liveLoop is a loop the watchdog checks: last tells when it last moved
// (zero: not started yet, not checked); limit is how long it may stay
// still.
type liveLoop struct {
	name  string
	last  func(now time.Time) time.Time
	limit time.Duration
}

// watchdog decides whether systemd's watchdog is fed: only while every
// started loop moved within its limit.
type watchdog struct {
	loops  []liveLoop
	log    *slog.Logger
	notify *notifier
	// stuck is the loop that held the feeding back at the last check, ""
	// when fed.
	stuck string
}

// check tells whether the watchdog may be fed at now, and logs one line
// (and a STATUS) when a loop starts or stops holding the feeding back.
func (w *watchdog) check(now time.Time) bool {
	for _, l := range w.loops {
		last := l.last(now)
		if last.IsZero() || now.Sub(last) <= l.limit {
			continue
		}
		if w.stuck != l.name {
			w.stuck = l.name
			w.log.Error("watchdog not fed: a loop made no progress", "loop", l.name, "since", last.UTC().Format(time.RFC3339), "limit", l.limit)
			w.notify.send(sdnotify.Status(fmt.Sprintf("stuck: %s made no progress since %s", l.name, last.UTC().Format(time.RFC3339))))
		}
		return false
	}
	if w.stuck != "" {
		w.log.Info("watchdog fed again: every loop moves", "loop", w.stuck)
		w.notify.send(sdnotify.Status("running"))
		w.stuck = ""
	}
	return true
}

// run feeds the watchdog every interval/2 while check allows it, until ctx
// ends.
func (w *watchdog) run(ctx context.Context, interval time.Duration, now func() time.Time) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		if w.check(now()) {
			w.notify.send(sdnotify.Watchdog)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// liveLoops are the loops the watchdog checks: the framework's starters
// (spawn) and queue polls, the shared inventory's refresh and the cleanup
// of stale VMs.
func liveLoops(o Options, cfg *config.Config, fw *hatchery.Framework, h *vsphere.HatcheryVSphere, shared *inventory.Shared) []liveLoop {
	limit := func(def time.Duration) time.Duration {
		if o.WatchdogLimit > 0 {
			return o.WatchdogLimit
		}
		return def
	}
	poll := o.Intervals.QueuePolling
	if poll <= 0 {
		poll = hatchery.DefaultIntervals().QueuePolling
	}
	loops := []liveLoop{
		{name: "spawn", limit: limit(DefaultWatchdogSpawnLimit), last: func(now time.Time) time.Time {
			s, _ := fw.LoopProgress(now)
			return s
		}},
		// A poll pass waits for a starter to take each job it found.
		{name: "queue poll", limit: limit(DefaultWatchdogSpawnLimit + 4*poll), last: func(now time.Time) time.Time {
			_, q := fw.LoopProgress(now)
			return q
		}},
		{name: "cleanup", limit: limit(4*cfg.KillAwolServersIntervalDuration() + DefaultWatchdogLoopSlack), last: func(time.Time) time.Time {
			return h.LoopProgress("kill-awol-servers")
		}},
	}
	if shared != nil {
		loops = append(loops, liveLoop{name: "inventory refresh", limit: limit(4*cfg.InventoryRefreshIntervalDuration() + DefaultWatchdogLoopSlack),
			last: func(time.Time) time.Time { return shared.Stats().LastRefresh }})
	}
	return loops
}
