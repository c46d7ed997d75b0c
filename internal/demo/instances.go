package demo

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// MaxInstances is the most daemons Run starts on one pair of simulators
// (Options.Instances): the checks of a --once run are written for two.
const MaxInstances = 2

// sampleEvery is the period of the simulator sampler of a --once run.
const sampleEvery = 50 * time.Millisecond

// instanceConfig is the configuration of instance i (0-based) of n: the
// demo configuration, with /mon on a free loopback port for every instance
// but the first.
func instanceConfig(cfg *config.Config, i int) *config.Config {
	c := *cfg
	if i > 0 {
		c.CommonConfiguration.HTTP.Addr, c.CommonConfiguration.HTTP.Port = "127.0.0.1", 0
	}
	return &c
}

// warnCounter is a slog handler that counts the records at WARN and above
// and passes every record its inner handler wants on to it: the demo's
// quiet check (a healthy run logs no WARN).
type warnCounter struct {
	inner slog.Handler
	n     *atomic.Int64
	first *firstLine
}

// firstLine keeps the message of the first record counted.
type firstLine struct {
	mu  sync.Mutex
	msg string
}

func newWarnCounter(inner slog.Handler) *warnCounter {
	return &warnCounter{inner: inner, n: &atomic.Int64{}, first: &firstLine{}}
}

func (w *warnCounter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || w.inner.Enabled(ctx, l)
}

func (w *warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		if w.n.Add(1) == 1 {
			w.first.mu.Lock()
			w.first.msg = r.Level.String() + " " + r.Message
			w.first.mu.Unlock()
		}
	}
	if !w.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return w.inner.Handle(ctx, r)
}

func (w *warnCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnCounter{inner: w.inner.WithAttrs(as), n: w.n, first: w.first}
}

func (w *warnCounter) WithGroup(name string) slog.Handler {
	return &warnCounter{inner: w.inner.WithGroup(name), n: w.n, first: w.first}
}

// count is how many records at WARN and above were logged, and the first.
func (w *warnCounter) count() (int64, string) {
	w.first.mu.Lock()
	defer w.first.mu.Unlock()
	return w.n.Load(), w.first.msg
}

// sampler watches the simulator all along a --once run: two live VMs of
// the hatchery recording one job (a double claim), two powered-on VMs
// holding one address (an address given twice).
type sampler struct {
	env  *vcsimtest.Env
	name string // hatchery name

	mu      sync.Mutex
	samples int
	claims  map[string]bool // "job: vm, vm"
	clashes map[string]bool // "ip: vm, vm"
}

func newSampler(env *vcsimtest.Env, name string) *sampler {
	return &sampler{env: env, name: name, claims: map[string]bool{}, clashes: map[string]bool{}}
}

// run samples every sampleEvery until ctx ends.
func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample() {
	vms := listVMs(s.env)
	claims := JobClaims(vms, s.name)
	clashes := IPClashes(vms)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, c := range claims {
		s.claims[c] = true
	}
	for _, c := range clashes {
		s.clashes[c] = true
	}
}

// result is what the sampler saw: samples taken, double claims, clashes.
func (s *sampler) result() (int, []string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, sortedKeys(s.claims), sortedKeys(s.clashes)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// JobClaims lists the jobs that two or more VMs of hatchery name (templates
// aside) record at once, as "job: vm, vm".
func JobClaims(vms []SimVM, name string) []string {
	by := map[string][]string{}
	for _, v := range vms {
		if v.Template || v.Annotation == nil || v.Annotation.HatcheryName != name || v.Annotation.JobID == "" {
			continue
		}
		by[v.Annotation.JobID] = append(by[v.Annotation.JobID], v.Name)
	}
	return shared(by)
}

// IPClashes lists the addresses that two or more powered-on VMs report at
// once, as "ip: vm, vm".
func IPClashes(vms []SimVM) []string {
	by := map[string][]string{}
	for _, v := range vms {
		if v.PoweredOn && v.IP != "" {
			by[v.IP] = append(by[v.IP], v.Name)
		}
	}
	return shared(by)
}

// shared lists the keys of by that two or more VMs hold, as
// "key: vm, vm", sorted.
func shared(by map[string][]string) []string {
	var out []string
	for k, names := range by {
		if len(names) > 1 {
			sort.Strings(names)
			out = append(out, k+": "+strings.Join(names, ", "))
		}
	}
	sort.Strings(out)
	return out
}

// Check is one end-of-run check of a --once run.
type Check struct {
	// Name says what is checked, e.g. "every job ran exactly once".
	Name string
	// Failed is what was found wrong; "" when the check passed.
	Failed string
	// Detail is what was counted, printed with the result.
	Detail string
}

// checkRun runs the end-of-run checks of a --once run: rep and the API's
// job states, the launches per VM, what the sampler saw, the hatchery's VMs
// left and the records logged at WARN.
func (d *driver) checkRun(rep *Report, smp *sampler, quiet *warnCounter, poolLeft func() (workers, pool []string)) []Check {
	var checks []Check

	// Every job ran exactly once: one worker launched for it over all
	// instances, and the API holds it Success.
	var bad []string
	for _, j := range rep.Jobs {
		st := d.jobStatus(j)
		if j.Launches != 1 || st != "Success" {
			bad = append(bad, fmt.Sprintf("job %d: %d workers launched, status %s", j.Seq, j.Launches, st))
		}
	}
	checks = append(checks, Check{Name: "every job ran exactly once", Failed: firstOf(bad), Detail: fmt.Sprintf("%d jobs, %d bad", len(rep.Jobs), len(bad))})

	// No VM claimed twice: no VM got two launches; no two live VMs
	// recorded one job (sampled).
	samples, claims, clashes := smp.result()
	d.mu.Lock()
	var twice []string
	for vm, n := range d.launchesByVM {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s got %d launches", vm, n))
		}
	}
	vmsLaunched := len(d.launchesByVM)
	d.mu.Unlock()
	sort.Strings(twice)
	twice = append(twice, claims...)
	checks = append(checks, Check{Name: "no VM claimed twice", Failed: firstOf(twice), Detail: fmt.Sprintf("%d VMs launched, %d samples", vmsLaunched, samples)})

	// No address given twice: no two powered-on VMs with one address
	// (sampled), and each worker's guest reported the address its
	// annotation records.
	addr := append(append([]string(nil), clashes...), rep.IPClashes...)
	addr = append(addr, rep.IPMismatches...)
	checks = append(checks, Check{Name: "no address given twice", Failed: firstOf(addr), Detail: fmt.Sprintf("%d samples", samples)})

	// No worker's VM vanished while its worker ran (destroyed under it).
	var lost []string
	for _, j := range rep.Lost() {
		lost = append(lost, fmt.Sprintf("job %d: %s", j.Seq, j.VM))
	}
	checks = append(checks, Check{Name: "no VM vanished under its worker", Failed: firstOf(lost), Detail: fmt.Sprintf("%d jobs", len(rep.Jobs))})

	// No VM of ours left but the warm pool and the instant parents the
	// configuration declares (instant.go: parentsLeft).
	workers, pool := poolLeft()
	parentsBad, parentKeys := parentsLeft(d.cfg, d.ourParents(), d.instantFlavors())
	left := ""
	if len(workers) > 0 {
		left = fmt.Sprintf("%d worker VMs left: %s", len(workers), strings.Join(workers, ", "))
	} else if want := poolSize(d.cfg); len(pool) != want {
		left = fmt.Sprintf("warm pool of %d VMs, want %d", len(pool), want)
	} else {
		left = parentsBad
	}
	detail := fmt.Sprintf("%d pool VMs", len(pool))
	if len(parentKeys) > 0 {
		detail += fmt.Sprintf(", %d instant parents: %s", len(parentKeys), strings.Join(parentKeys, " "))
	}
	checks = append(checks, Check{Name: "no VM left but pool and parents", Failed: left, Detail: detail})

	// A healthy run logs no WARN.
	n, first := quiet.count()
	q := ""
	if n > 0 {
		q = fmt.Sprintf("%d records at WARN or above, first: %s", n, first)
	}
	checks = append(checks, Check{Name: "no WARN logged by the hatchery", Failed: q, Detail: "quiet"})
	return checks
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) == 1 {
		return s[0]
	}
	return fmt.Sprintf("%s (and %d more)", s[0], len(s)-1)
}

// poolSize is the configured number of warm-pool VMs.
func poolSize(cfg *config.Config) int {
	n := 0
	for _, p := range cfg.WorkerProvisioning {
		n += p.Number
	}
	return n
}

// jobStatus is the job's status in the CDS API simulator.
func (d *driver) jobStatus(j JobReport) string {
	if j.V1 {
		var id int64
		if _, err := fmt.Sscan(j.JobID, &id); err != nil {
			return "unknown"
		}
		st, ok := d.api.JobV1(id)
		if !ok {
			return "unknown"
		}
		return st.Status
	}
	st, ok := d.api.JobV2(j.JobID)
	if !ok {
		return "unknown"
	}
	return st.Status
}

// ourVMs splits the hatchery's VMs (templates and instant parents aside:
// ourParents) into workers and warm-pool VMs, by name.
func (d *driver) ourVMs() (workers, pool []string) {
	name := d.cfg.CommonConfiguration.Name
	for _, v := range listVMs(d.env) {
		if v.Template || v.Annotation == nil || v.Annotation.HatcheryName != name || v.InstantParent {
			continue
		}
		if v.Annotation.Provisioning {
			pool = append(pool, v.Name)
		} else {
			workers = append(workers, v.Name)
		}
	}
	return workers, pool
}

// ourParents lists the hatchery's instant parents, by their records.
func (d *driver) ourParents() []SimVM {
	name := d.cfg.CommonConfiguration.Name
	var out []SimVM
	for _, v := range listVMs(d.env) {
		if !v.Template && v.InstantParent && v.Annotation.HatcheryName == name {
			out = append(out, v)
		}
	}
	return out
}

// instantFlavors lists the flavors the run's instant jobs asked for.
func (d *driver) instantFlavors() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, j := range d.order {
		if j.Instant && !seen[j.Flavor] {
			seen[j.Flavor] = true
			out = append(out, j.Flavor)
		}
	}
	return out
}
