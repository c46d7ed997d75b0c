package vsphere

import (
	"sync"
	"time"
)

// unrecordedStarts remembers, for the workers this run launched whose start
// could not be written on their VM (the annotation write failed after the
// launch), when they were launched. Without it the awol cleanup would take
// such a VM, once its worker finished and powered it off, for a worker
// still starting and keep it for the registration TTL, holding its IP and
// its share of the capacity. An accelerator like the other local
// bookkeeping: lost on restart, when the registration TTL applies again.
type unrecordedStarts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newUnrecordedStarts() *unrecordedStarts { return &unrecordedStarts{at: map[string]time.Time{}} }

// add records that the worker of VM name was launched at t.
func (u *unrecordedStarts) add(name string, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.at[name] = t
}

// get returns when the worker of VM name was launched, if recorded here.
func (u *unrecordedStarts) get(name string) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.at[name]
	return t, ok
}

// remove forgets VM name (deleted).
func (u *unrecordedStarts) remove(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.at, name)
}
