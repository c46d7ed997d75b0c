package vim

import "sync"

// Coalescer coalesces concurrent misses of a cache: for one key, the first
// caller resolves, the others wait for it and read the cache again. The
// adapter's placement cache uses it, and so does the hatchery's cache of
// template devices. The zero value is ready to use.
type Coalescer[K comparable] struct {
	mu sync.Mutex
	m  map[K]chan struct{}
}

// Lead returns, for key k, either nil and a done function (the caller
// resolves, stores, then calls done) or the channel closed when the
// resolution in flight ends.
func (f *Coalescer[K]) Lead(k K) (wait <-chan struct{}, done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.m[k]; ok {
		return ch, nil
	}
	if f.m == nil {
		f.m = map[K]chan struct{}{}
	}
	ch := make(chan struct{})
	f.m[k] = ch
	return nil, func() {
		f.mu.Lock()
		delete(f.m, k)
		f.mu.Unlock()
		close(ch)
	}
}

// Len is the number of resolutions in flight.
func (f *Coalescer[K]) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}
