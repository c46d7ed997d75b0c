package vcenter

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter/vim"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// placementCacheTTL is how long a resolved folder, resource pool, datastore
// or network is reused. Resolving one by inventory path walks the inventory
// (the VM folder's or the pool's children: ~0.6 MB and 150 ms at 1,000 VMs
// in vcsim), once per clone without a cache. These objects are configured,
// not created by the hatchery, and change only when an operator moves or
// renames them: five minutes bounds how long such a change goes unseen.
const placementCacheTTL = 5 * time.Minute

// placementRetryMin and placementRetryMax bound the back-off of a failed
// lookup (no such object, or several: a *PlacementError). Every reader of
// the pool (the metrics pass every 30 s, the admission, the inventory's
// refresh) asked again, about five times a minute, each time walking the
// hosts and clusters; an operator fixes such a problem in minutes (a pool
// created, resourcePoolString set and the daemon restarted), so the
// lookup is tried again after one minute, then two, four, up to ten.
const (
	placementRetryMin = time.Minute
	placementRetryMax = 10 * time.Minute
)

// placementCache memoises placement lookups by kind and name. Its mutex
// never spans a round trip: a miss resolves outside it. Concurrent misses
// of one key are coalesced: the first resolves, the others wait for it
// (a burst of spawns after start would otherwise walk the inventory once
// per spawn, all at the same time: make bench-latency showed seconds of
// it); when the first fails, each waiter resolves on its own, unless the
// failure is a topology answer (a *PlacementError): that one is cached
// with a back-off (placementRetryMin..placementRetryMax), logged once as
// an ERROR, listed by problems until a lookup succeeds (one INFO line).
type placementCache struct {
	mu       sync.Mutex
	now      func() time.Time
	log      *slog.Logger
	entries  map[placementKey]placementEntry
	failures map[placementKey]*placementFailure
	inflight vim.Coalescer[placementKey]
}

type placementKey struct{ kind, name string }

type placementEntry struct {
	obj     any
	expires time.Time
}

// placementFailure is a key whose last lookup failed with a
// *PlacementError, until retry.
type placementFailure struct {
	err          error
	setting      string // the *PlacementError's key
	since, retry time.Time
	backoff      time.Duration
}

func newPlacementCache(log *slog.Logger) *placementCache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &placementCache{now: time.Now, log: log, entries: map[placementKey]placementEntry{}, failures: map[placementKey]*placementFailure{}}
}

// get returns a live entry of kind and name, or the failure cached for
// them until its retry.
func (p *placementCache) get(kind, name string) (any, error, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := placementKey{kind, name}
	if f, ok := p.failures[k]; ok && p.now().Before(f.retry) {
		return nil, f.err, true
	}
	e, ok := p.entries[k]
	if !ok || !p.now().Before(e.expires) {
		return nil, nil, false
	}
	return e.obj, nil, true
}

// put stores obj for placementCacheTTL; a failure of the key ends.
func (p *placementCache) put(kind, name string, obj any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := placementKey{kind, name}
	now := p.now()
	p.entries[k] = placementEntry{obj: obj, expires: now.Add(placementCacheTTL)}
	if f, ok := p.failures[k]; ok {
		delete(p.failures, k)
		p.log.Info("vcenter placement resolved", "setting", f.setting, "name", name, "unresolved_for", now.Sub(f.since).Round(time.Second).String())
	}
}

// fail records a lookup's error: a *PlacementError is cached until a
// retry time that backs off; others (transport, context) are not.
func (p *placementCache) fail(kind, name string, err error) {
	pe := vim.PlacementErrorOf(err)
	if pe == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := placementKey{kind, name}
	now := p.now()
	f, ok := p.failures[k]
	if !ok {
		f = &placementFailure{since: now, backoff: placementRetryMin}
		p.failures[k] = f
		p.log.Error("vcenter placement unresolved: lookups of it wait for the retry", "setting", pe.Setting, logkey.Err, err, "retry_in", f.backoff.String())
	} else {
		f.backoff = min(2*f.backoff, placementRetryMax)
		p.log.Debug("vcenter placement still unresolved", "setting", pe.Setting, logkey.Err, err, "retry_in", f.backoff.String())
	}
	f.err, f.setting, f.retry = err, pe.Setting, now.Add(f.backoff)
}

// problems lists the failing keys, by setting then name.
func (p *placementCache) problems() []PlacementProblem {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PlacementProblem, 0, len(p.failures))
	for _, f := range p.failures {
		out = append(out, PlacementProblem{Setting: f.setting, Err: f.err, Since: f.since, Retry: f.retry})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Err.Error() < out[j].Err.Error() })
	return out
}

// settingOf is the top-level configuration key of a lookup kind
// (Client.placementSetting names a [[placements]] entry's).
func settingOf(kind string) string {
	switch kind {
	case "folder":
		return "folderString"
	case "pool":
		return "resourcePoolString"
	case "datastore":
		return "datastoreString"
	case "network", "backing":
		return "networkString"
	}
	return kind
}

// cachedLookup returns the cached object of kind and name, else resolves,
// stores and returns it; a resolution of the same key already in flight
// is waited for (bounded by ctx) rather than repeated. A *PlacementError
// is cached until its retry (placementCache.fail); other errors are not.
func cachedLookup[T any](ctx context.Context, p *placementCache, kind, name string, resolve func() (T, error)) (T, error) {
	var zero T
	if p == nil {
		return resolve()
	}
	cached := func() (T, error, bool) {
		o, err, ok := p.get(kind, name)
		if !ok {
			return zero, nil, false
		}
		if err != nil {
			return zero, err, true
		}
		if t, ok := o.(T); ok {
			return t, nil, true
		}
		return zero, nil, false
	}
	lookup := func() (T, error) {
		t, err := resolve()
		if err != nil {
			p.fail(kind, name, err)
			return t, err
		}
		p.put(kind, name, t)
		return t, nil
	}
	if t, err, ok := cached(); ok {
		return t, err
	}
	wait, done := p.inflight.Lead(placementKey{kind, name})
	if wait != nil {
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("look up %s %q: %w", kind, name, ctx.Err())
		case <-wait:
		}
		if t, err, ok := cached(); ok {
			return t, err
		}
		// The leader failed, and not with a topology answer: resolve on
		// our own.
		return lookup()
	}
	defer done()
	// A resolution may have ended between the miss and the lead.
	if t, err, ok := cached(); ok {
		return t, err
	}
	return lookup()
}
