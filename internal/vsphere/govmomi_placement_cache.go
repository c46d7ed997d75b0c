package vsphere

import (
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
// never spans a round trip: a miss resolves outside it (two concurrent
// misses may both resolve; the last one stored wins, both are right).
type placementCache struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[placementKey]placementEntry
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
// stores and returns it. Errors are not cached.
func cachedLookup[T any](p *placementCache, kind, name string, resolve func() (T, error)) (T, error) {
	if p != nil {
		if o, ok := p.get(kind, name); ok {
			if t, ok := o.(T); ok {
				return t, nil
			}
		}
	}
	t, err := resolve()
	if err == nil && p != nil {
		p.put(kind, name, t)
	}
	return t, err
}
