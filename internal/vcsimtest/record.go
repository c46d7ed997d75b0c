package vcsimtest

import (
	"context"
	"slices"
	"sync"
)

// record is an append-only list that can be waited on: the calls of
// FakeGuest, the boots of FakeCloudInit. Safe for concurrent use.
type record[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{} // closed and replaced on every add
}

func (r *record[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, v)
	if r.notify != nil {
		close(r.notify)
	}
	r.notify = make(chan struct{})
}

// all returns a copy of every item, oldest first.
func (r *record[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}

// wait blocks until at least n items were added or ctx ends, and returns
// the items; no polling.
func (r *record[T]) wait(ctx context.Context, n int) ([]T, error) {
	for {
		r.mu.Lock()
		if len(r.items) >= n {
			out := slices.Clone(r.items)
			r.mu.Unlock()
			return out, nil
		}
		if r.notify == nil {
			r.notify = make(chan struct{})
		}
		ch := r.notify
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return r.all(), ctx.Err()
		case <-ch:
		}
	}
}
