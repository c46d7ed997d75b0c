package vsphere

import (
	"sort"
	"sync"
)

// nameSet is a concurrency-safe set of names that are not VMs: the job keys
// of spawns in flight (pendingJobs). What the hatchery knows of a VM lives
// in the lifecycle table (docs/lifecycle.md). It is an accelerator, safe to
// lose on restart.
type nameSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func newNameSet() *nameSet { return &nameSet{m: map[string]struct{}{}} }

// Add inserts name and reports whether it was absent.
func (s *nameSet) Add(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[name]; ok {
		return false
	}
	s.m[name] = struct{}{}
	return true
}

// Remove deletes name.
func (s *nameSet) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
}

// Has reports whether name is present.
func (s *nameSet) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[name]
	return ok
}

// List returns the names, sorted.
func (s *nameSet) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.m))
	for k := range s.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Len returns the number of names.
func (s *nameSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
