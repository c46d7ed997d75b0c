package vcenter

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// placementCacheTTL is how long a resolved folder, resource pool, datastore
// or network is reused. Resolving one by inventory path walks the inventory
// (the VM folder's or the pool's children: ~0.6 MB and 150 ms at 1,000 VMs
// in vcsim), once per clone without a cache. These objects are configured,
// not created by the hatchery, and change only when an operator moves or
// renames them: five minutes bounds how long such a change goes unseen.
const placementCacheTTL = 5 * time.Minute

// placementCache memoises placement lookups by kind and name. Its mutex
// never spans a round trip: a miss resolves outside it. Concurrent misses
// of one key are coalesced: the first resolves, the others wait for it
// (a burst of spawns after start would otherwise walk the inventory once
// per spawn, all at the same time: make bench-latency showed seconds of
// it); when the first fails, each waiter resolves on its own.
type placementCache struct {
	mu       sync.Mutex
	now      func() time.Time
	entries  map[placementKey]placementEntry
	inflight Coalescer[placementKey]
}

type placementKey struct{ kind, name string }

type placementEntry struct {
	obj     any
	expires time.Time
}

func newPlacementCache() *placementCache {
	return &placementCache{now: time.Now, entries: map[placementKey]placementEntry{}}
}

// get returns a live entry of kind and name.
func (p *placementCache) get(kind, name string) (any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[placementKey{kind, name}]
	if !ok || !p.now().Before(e.expires) {
		return nil, false
	}
	return e.obj, true
}

// put stores obj for placementCacheTTL.
func (p *placementCache) put(kind, name string, obj any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries[placementKey{kind, name}] = placementEntry{obj: obj, expires: p.now().Add(placementCacheTTL)}
}

// cachedLookup returns the cached object of kind and name, else resolves,
// stores and returns it; a resolution of the same key already in flight
// is waited for (bounded by ctx) rather than repeated. Errors are not
// cached.
func cachedLookup[T any](ctx context.Context, p *placementCache, kind, name string, resolve func() (T, error)) (T, error) {
	if p == nil {
		return resolve()
	}
	cached := func() (T, bool) {
		if o, ok := p.get(kind, name); ok {
			if t, ok := o.(T); ok {
				return t, true
			}
		}
		var zero T
		return zero, false
	}
	if t, ok := cached(); ok {
		return t, nil
	}
	wait, done := p.inflight.Lead(placementKey{kind, name})
	if wait != nil {
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("look up %s %q: %w", kind, name, ctx.Err())
		case <-wait:
		}
		if t, ok := cached(); ok {
			return t, nil
		}
		// The leader failed: resolve on our own.
		t, err := resolve()
		if err == nil {
			p.put(kind, name, t)
		}
		return t, err
	}
	defer done()
	// A resolution may have ended between the miss and the lead.
	if t, ok := cached(); ok {
		return t, nil
	}
	t, err := resolve()
	if err == nil {
		p.put(kind, name, t)
	}
	return t, err
}
