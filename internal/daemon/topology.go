package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// Bounds of the topology check (topology.run).
const (
	// topologyCheckTimeout bounds one check: a few lookups, one read of
	// the VMs' names and one privilege query, each request bounded by the
	// client's request timeout (15 s); the hatchery serves no job before
	// the first check ends, so a vCenter that hangs must not hold it long.
	topologyCheckTimeout = 2 * time.Minute
	// topologyRecheckMin and topologyRecheckMax bound the back-off between
	// checks while a template or privilege problem remains (or a check
	// could not ask): an operator fixes one in minutes; each check reads
	// the names of the datacenter's VMs once.
	topologyRecheckMin = time.Minute
	topologyRecheckMax = 10 * time.Minute
)

// topologyComponent is the /mon/status line of the topology.
const topologyComponent = "vCenter topology"

// topology checks the configured topology on vCenter (vsphere.CheckTopology)
// once the client is connected, before the hatchery serves jobs, and again
// with a back-off while a problem remains; it keeps the template and
// privilege problems for /mon/status (the placement ones are the client's
// own: vcenter.Client.PlacementProblems, cached, logged and retried by
// it). Each problem is logged once as an ERROR when first seen, and once
// as an INFO when it is gone.
type topology struct {
	vc  *vcenter.Client
	cfg *config.Config
	log *slog.Logger

	mu       sync.Mutex
	checked  bool
	problems []vcenter.TopologyProblem // not placement ones, from the last check
	resolved map[string]string
	notes    []string
	err      error // the last check's failure to ask
}

// run waits for the client's first connection, checks, closes checked,
// then checks again with a back-off while a problem remains, until ctx
// ends.
func (t *topology) run(ctx context.Context, checked chan<- struct{}) {
	select {
	case <-t.vc.Ready():
	case <-ctx.Done():
		return
	}
	again := t.check(ctx)
	close(checked)
	backoff := topologyRecheckMin
	for again {
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		again = t.check(ctx)
		backoff = min(2*backoff, topologyRecheckMax)
	}
}

// check runs one check and logs what changed; it tells whether to check
// again (a problem remains, or vCenter could not be asked).
func (t *topology) check(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, topologyCheckTimeout)
	defer cancel()
	_, rep, err := vsphere.CheckTopology(cctx, t.vc, t.cfg)
	if ctx.Err() != nil {
		return false
	}
	var problems []vcenter.TopologyProblem
	placement := 0
	for _, p := range rep.Problems {
		if p.Placement {
			placement++ // logged by the client
			continue
		}
		problems = append(problems, p)
	}

	t.mu.Lock()
	first := !t.checked
	before := map[vcenter.TopologyProblem]bool{}
	for _, p := range t.problems {
		before[p] = true
	}
	if err == nil {
		t.problems, t.resolved, t.notes = problems, rep.Resolved, rep.Notes
	}
	t.checked, t.err = true, err
	t.mu.Unlock()

	if err != nil {
		t.log.Warn("vcenter topology not checked, checking again later", logkey.Err, err)
		return true
	}
	now := map[vcenter.TopologyProblem]bool{}
	for _, p := range problems {
		now[p] = true
		if !before[p] {
			t.log.Error("vcenter topology problem", "setting", config.KeyPrefix+"."+p.Key, logkey.Detail, p.Problem)
		}
	}
	for p := range before {
		if !now[p] {
			t.log.Info("vcenter topology problem resolved", "setting", config.KeyPrefix+"."+p.Key)
		}
	}
	for _, n := range rep.Notes {
		if first {
			t.log.Info("vcenter topology not fully checked", logkey.Detail, n)
		}
	}
	if first {
		t.log.Info("vcenter topology checked", "problems", len(problems)+placement, "resolved", summarize(rep.Resolved))
	}
	return len(problems)+placement > 0
}

// line is the /mon/status line: AL while a placement setting does not
// resolve (no clone can be placed), WARN for a template or privilege
// problem, a check that could not ask, or no check yet while vCenter is
// not connected or not answering, OK otherwise.
func (t *topology) line() sdk.MonitoringStatusLine {
	l := sdk.MonitoringStatusLine{Component: topologyComponent, Status: sdk.MonitoringStatusOK}
	var parts []string
	for _, p := range t.vc.PlacementProblems() {
		parts = append(parts, fmt.Sprintf("%s.%s: %v", config.KeyPrefix, p.Setting, p.Err))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(parts) > 0 {
		l.Status = sdk.MonitoringStatusAlert
	}
	for _, p := range t.problems {
		parts = append(parts, fmt.Sprintf("%s.%s: %s", config.KeyPrefix, p.Key, p.Problem))
		if l.Status == sdk.MonitoringStatusOK {
			l.Status = sdk.MonitoringStatusWarn
		}
	}
	switch {
	case len(parts) > 0:
		l.Value = strings.Join(parts, "; ")
	case t.err != nil:
		l.Status, l.Value = sdk.MonitoringStatusWarn, fmt.Sprintf("not checked: %v", t.err)
	case !t.checked && !t.vc.Up():
		// Nothing was checked and nothing can be: not OK (the vCenter
		// line says why).
		l.Status, l.Value = sdk.MonitoringStatusWarn, "not checked yet: vCenter not connected or not answering"
	case !t.checked:
		l.Value = "not checked yet"
	default:
		l.Value = "resolved: " + summarize(t.resolved)
		if len(t.notes) > 0 {
			l.Value += "; " + strings.Join(t.notes, "; ")
		}
	}
	return l
}

// summarize names the objects a check resolved, by key.
func summarize(resolved map[string]string) string {
	keys := make([]string, 0, len(resolved))
	for k := range resolved {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+resolved[k])
	}
	return strings.Join(parts, ", ")
}
