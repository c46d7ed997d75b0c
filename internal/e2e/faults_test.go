//go:build !race

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// faultMethods are the vCenter methods a fault run makes fail at random:
// the clone, the power-on (claims and fresh clones), the reconfigure
// (claims, annotation records) and the destroy (cleanup). Power-off is
// spared: the simulated workers power their own VMs off with it.
var faultMethods = []string{"CloneVM_Task", "PowerOnVM_Task", "ReconfigVM_Task", "Destroy_Task"}

// injectVCenterFaults makes every call of faultMethods fail with
// probability p (a SystemError fault). The second clone always fails, so
// that a short run whose random draws all pass still meets a fault (the
// simulator tries its rules in order; this one is spent after one use).
func injectVCenterFaults(env *vcsimtest.Env, p float64) {
	env.InjectFault(vcsimtest.Fault{Method: "CloneVM_Task", Skip: 1, Max: 1})
	for _, m := range faultMethods {
		env.InjectFault(vcsimtest.Fault{Method: m, Probability: p})
	}
}

// apiBursts makes the CDS API answer 503 to everything for burst, every
// period, until stop is closed; it returns how many bursts it started.
func apiBursts(api interface{ FailFor(time.Duration, int) }, period, burst time.Duration, stop <-chan struct{}, wg *sync.WaitGroup) *int64 {
	n := new(int64)
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			api.FailFor(burst, http.StatusServiceUnavailable)
			mu.Lock()
			*n++
			mu.Unlock()
		}
	}()
	return n
}

// lineCounter counts the lines written that contain substr and signals
// each one; it passes everything through to w.
type lineCounter struct {
	w      io.Writer
	substr string

	mu      sync.Mutex
	partial string
	n       int
	changed chan struct{}
}

func newLineCounter(w io.Writer, substr string) *lineCounter {
	return &lineCounter{w: w, substr: substr, changed: make(chan struct{}, 1)}
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	s := c.partial + string(p)
	lines := strings.Split(s, "\n")
	c.partial = lines[len(lines)-1]
	hit := false
	for _, l := range lines[:len(lines)-1] {
		if strings.Contains(l, c.substr) {
			c.n++
			hit = true
		}
	}
	c.mu.Unlock()
	if hit {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	return c.w.Write(p)
}

func (c *lineCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// waitCount blocks until count() >= n or ctx ends.
func (c *lineCounter) waitCount(ctx context.Context, n int) bool {
	for {
		if c.count() >= n {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.changed:
		}
	}
}

// ourLeft lists the VMs of ours other than the warm pool (templates and
// the demo's instant parents aside) and the warm pool's size.
func ourLeft(info demo.Info) (workers []demo.SimVM, pool int) {
	for _, v := range demo.ListVMs(info.Env) {
		if v.Template || v.Annotation == nil || v.Annotation.HatcheryName != info.Config.CommonConfiguration.Name || v.InstantParent {
			continue
		}
		if v.Annotation.Provisioning && !v.PoweredOn {
			pool++
			continue
		}
		workers = append(workers, v)
	}
	return workers, pool
}
