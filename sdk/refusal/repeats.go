package refusal

import (
	"strings"
	"sync"
)

// Repeats remembers, per job, the refusals already reported at Info, so a
// job refused again and again for the same reason (every poll of a long
// queue) is reported at Info once and at Debug after. The zero value is
// ready to use; it is safe for concurrent use.
type Repeats struct {
	mu     sync.Mutex
	logged map[string]map[string]bool // job key -> refusals without their counts
}

// stableReason drops the varying counts of a refusal's text ("max workers
// reached (10/10)" becomes "max workers reached").
func stableReason(reason string) string {
	if i := strings.Index(reason, " ("); i >= 0 {
		return reason[:i]
	}
	return reason
}

// First records reason for key and tells whether it is the first time.
func (l *Repeats) First(key, reason string) bool {
	r := stableReason(reason)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged == nil {
		l.logged = map[string]map[string]bool{}
	}
	m := l.logged[key]
	if m == nil {
		m = map[string]bool{}
		l.logged[key] = m
	}
	if m[r] {
		return false
	}
	m[r] = true
	return true
}

// Forget drops a job (it was booked or taken): if it comes back, its next
// refusal is reported at Info again.
func (l *Repeats) Forget(key string) {
	l.mu.Lock()
	delete(l.logged, key)
	l.mu.Unlock()
}

// Prune forgets the jobs of a queue (keys with prefix) that keep rejects.
func (l *Repeats) Prune(prefix string, keep func(key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.logged {
		if strings.HasPrefix(k, prefix) && !keep(k) {
			delete(l.logged, k)
		}
	}
}
