package hatchery

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/sdk/refusal"
)

// refusalCounts counts the jobs refused since start, by refusal code, for
// the "Job refusals" line of /mon/status. Safe for concurrent use; the
// zero value is ready.
type refusalCounts struct {
	mu sync.Mutex
	n  map[refusal.Reason]int
}

func (c *refusalCounts) add(r refusal.Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[refusal.Reason]int{}
	}
	c.n[r]++
}

// value renders the counts: "none", or "N since start: code n, ..." with
// the most frequent code first (ties by code).
func (c *refusalCounts) value() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.n) == 0 {
		return "none"
	}
	codes := make([]refusal.Reason, 0, len(c.n))
	total := 0
	for r, n := range c.n {
		codes = append(codes, r)
		total += n
	}
	slices.SortFunc(codes, func(a, b refusal.Reason) int {
		return cmp.Or(cmp.Compare(c.n[b], c.n[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(codes))
	for i, r := range codes {
		parts[i] = fmt.Sprintf("%s %d", r, c.n[r])
	}
	return fmt.Sprintf("%d since start: %s", total, strings.Join(parts, ", "))
}

// jobSkipped records a job refused with code r: the observer (the
// refusal metrics) and the "Job refusals" status line. Every refusal of a
// job goes through it once, with the code of its log line: the
// framework's decisions, the hatchery's admission, and a refusal at spawn
// time (processJob).
func (f *Framework) jobSkipped(r refusal.Reason) {
	f.refusals.add(r)
	f.obs.JobSkipped(r)
}
