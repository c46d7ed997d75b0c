package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/guest"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcheck"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// jobSpec is one kind of job the feeder cycles through.
type jobSpec struct {
	v1     bool
	flavor string
	// cloudInit: a V2 job on the cloud-init model (debian12-cloud).
	cloudInit bool
	// windows: a V2 job on the Windows model (win2022).
	windows bool
	// instant: a V2 job on the instant-clone model (debian12-instant,
	// instant.go).
	instant bool
}

// jobMix is the feeder's cycle: every V2 flavor (large on the Windows
// model), one V2 job on the cloud-init model, V1 jobs (small through a
// flavor requirement, and the default flavor), and last (its parents are
// up by then) one on the instant-clone model, of the template's size.
var jobMix = []jobSpec{
	{flavor: "medium"}, {v1: true, flavor: "small"}, {flavor: "large", windows: true},
	{v1: true, flavor: ""}, {flavor: "medium", cloudInit: true}, {flavor: "small", instant: true},
}

// jobLife is what the demo saw of one job.
type jobLife struct {
	JobReport
	finishing bool // FinishWorker scheduled
}

// driver feeds jobs, plays the workers and watches the cleanup.
type driver struct {
	o   Options
	cfg *config.Config
	env *vcsimtest.Env
	api *cdssim.Server
	out *printer
	log *slog.Logger

	mu       sync.Mutex
	jobs     map[string]*jobLife // by job id (V1 decimal, V2 run job id)
	byWorker map[string]*jobLife
	order    []*jobLife
	ipClash  []string
	// ipMismatch lists launches whose guest reported another address than
	// the one its annotation records.
	ipMismatch []string
	// launchesByVM counts the worker launches in each VM.
	launchesByVM map[string]int

	changed chan struct{} // coalescing: a job made progress
	soak    *soakRun      // nil outside a soak (soak.go)
	// forkedVMs are the VMs whose guest the simulator played as an
	// instant clone's child (instant.go).
	forkedVMs map[string]bool
}

func (d *driver) signal() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// flavorSize is the CPU/RAM a job of flavor f must get ("" = defaultFlavor).
func (d *driver) flavorSize(f string) (string, int32, int64) {
	if f == "" {
		f = d.cfg.DefaultFlavor
	}
	for _, fl := range d.cfg.Flavors {
		if strings.EqualFold(fl.Name, f) {
			return fl.Name, fl.CPUs, fl.MemoryMB
		}
	}
	return f, 0, 0
}

// feed queues Options.Jobs jobs (or one per JobEvery forever).
func (d *driver) feed(ctx context.Context) {
	t := time.NewTicker(d.o.JobEvery)
	defer t.Stop()
	for i := 0; d.o.Jobs <= 0 || i < d.o.Jobs; i++ {
		if !d.soakWait(ctx, d.o.JobEvery) || d.soakOver(i) {
			return
		}
		d.addJob(i, jobMix[i%len(jobMix)])
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *driver) addJob(n int, s jobSpec) {
	name, cpus, mem := d.flavorSize(s.flavor)
	r := JobReport{Seq: n + 1, V1: s.v1, CloudInit: s.cloudInit, Windows: s.windows, Instant: s.instant, Flavor: name, WantCPUs: cpus, WantMemoryMB: mem, Queued: time.Now()}
	if s.v1 {
		reqs := sdk.RequirementList{{Type: sdk.ModelRequirement, Value: v1ModelGroup + "/" + v1ModelName}}
		if s.flavor != "" {
			reqs = append(reqs, sdk.Requirement{Type: sdk.FlavorRequirement, Value: s.flavor})
		}
		r.JobID = strconv.FormatInt(d.api.AddJobV1(cdssim.JobV1{Requirements: reqs, JobName: fmt.Sprintf("build-%d", n+1)}), 10)
	} else {
		model := sdk.V2WorkerModelVSphereSpec{Image: imageTemplate, Username: guestUser, Password: guestPassword}
		modelName, osarch := v2ModelName, "linux/amd64"
		switch {
		case s.cloudInit:
			model = sdk.V2WorkerModelVSphereSpec{Image: cloudInitTemplate} // no guest account at all
		case s.instant:
			model, modelName = sdk.V2WorkerModelVSphereSpec{Image: instantTemplate}, instantTemplate
		case s.windows:
			model.Image, modelName, osarch = windowsTemplate, windowsTemplate, "windows/amd64"
		}
		spec, _ := json.Marshal(model)
		r.JobID = d.api.AddJobV2(cdssim.JobV2{
			Model:   sdk.V2WorkerModel{Name: modelName, OSArch: osarch, Type: sdk.VSphere, Spec: spec},
			RunsOn:  sdk.V2JobRunsOn{Model: modelName, Flavor: s.flavor},
			JobName: fmt.Sprintf("build-%d", n+1),
		})
	}
	j := &jobLife{JobReport: r}
	d.mu.Lock()
	d.jobs[r.JobID] = j
	d.order = append(d.order, j)
	d.mu.Unlock()
	d.out.job(j, "queued (%s)", j.kind())
}

// workers plays the worker of every launch the fake guest records: the VM
// name is the worker name, CDS_CONFIG says which job it runs. A Windows
// guest's launch is PowerShell, its script in its environment (the fake
// guest checked it): the script is what the worker's download is read
// from.
func (d *driver) workers(ctx context.Context) {
	follow(ctx, d.env.Guest.WaitForCalls, func(ctx context.Context, c vcsimtest.GuestCall) {
		if c.Fault != nil {
			return
		}
		switch {
		case c.Windows:
			script, ok := windowsScript(c)
			if !ok {
				return // the readiness probe
			}
			c.Arguments = script
		case c.ProgramPath != "/bin/echo":
			return
		}
		if wc, ok := workerConfig(c); ok {
			d.runWorker(ctx, c, wc)
		}
	})
}

// cloudInitWorkers plays the worker of every VM that booted from its
// cloud-init userdata (the simulator's FakeCloudInit): the CDS_CONFIG the
// userdata wrote goes to the same worker life as a guest-operations launch.
func (d *driver) cloudInitWorkers(ctx context.Context) {
	follow(ctx, d.env.CloudInit.WaitForBoots, func(ctx context.Context, b vcsimtest.CloudInitBoot) {
		// The VM's state, read once (Inspect walks the simulator's VMs),
		// tells the boots that run no worker by the record on the VM.
		if st, ok := d.env.Inspect(b.VM); ok {
			if d.parentBoot(b, st) {
				return // an instant parent's boot runs no worker (instant.go)
			}
			if d.checkBoot(b, st) {
				return // a `vcenter check` VM's boot runs no worker
			}
		}
		d.noteFork(b)
		if b.Err != "" || b.CDSConfig == "" {
			d.log.Warn("demo: cloud-init boot without a worker config", logkey.VM, b.VM, logkey.Err, b.Err)
			return
		}
		c := vcsimtest.GuestCall{VM: b.VM, ProgramPath: "cloud-init", Arguments: string(b.Userdata), EnvVariables: []string{"CDS_CONFIG=" + b.CDSConfig}}
		if wc, ok := workerConfig(c); ok {
			d.runWorker(ctx, c, wc)
		}
	})
}

// checkBoot tells whether b is the boot of a VM `vcenter check` made (its
// record, internal/vcheck, in st's annotation or its extraConfig mirror):
// the check's userdata holds no worker config on purpose, so the boot is
// told at INFO, not as a worker that could not start.
func (d *driver) checkBoot(b vcsimtest.CloudInitBoot, st vcsimtest.VMState) bool {
	if !strings.HasPrefix(st.Annotation, vcheck.RecordPrefix) && !strings.HasPrefix(st.ExtraConfig[vcheck.RecordKey], vcheck.RecordPrefix) {
		return false
	}
	d.log.Info("demo: a vcenter check VM booted from its cloud-init userdata; it runs no worker", logkey.VM, b.VM)
	return true
}

// follow hands every item wait reports, once and in its own goroutine, to
// each until ctx ends; the goroutines are joined before it returns.
func follow[T any](ctx context.Context, wait func(context.Context, int) ([]T, error), each func(context.Context, T)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	seen := 0
	for {
		items, err := wait(ctx, seen+1)
		if err != nil {
			return
		}
		for _, it := range items[seen:] {
			wg.Add(1)
			go func() { // joined above; stopped by ctx
				defer wg.Done()
				each(ctx, it)
			}()
		}
		seen = len(items)
	}
}

// windowsScript decodes the script of a Windows launch; false for a call
// that carries none (the readiness probe).
func windowsScript(c vcsimtest.GuestCall) (string, bool) {
	for _, e := range c.EnvVariables {
		if enc, ok := strings.CutPrefix(e, guest.ScriptEnv+"="); ok {
			s, err := guest.DecodeScript(enc)
			return s, err == nil
		}
	}
	return "", false
}

// workerConfig decodes CDS_CONFIG from a launch.
func workerConfig(c vcsimtest.GuestCall) (spawn.WorkerConfig, bool) {
	for _, e := range c.EnvVariables {
		if enc, ok := strings.CutPrefix(e, "CDS_CONFIG="); ok {
			wc, err := spawn.DecodeWorkerConfig(enc)
			return wc, err == nil
		}
	}
	return spawn.WorkerConfig{}, false
}

// runWorker is one worker's life: launched (VM, flavor, hardware, IP),
// signed in with the token its hatchery gave it and its job taken (over the
// simulator's HTTP API, as the real worker does), finished after
// WorkerRunTime, VM powered off.
func (d *driver) runWorker(ctx context.Context, c vcsimtest.GuestCall, wc spawn.WorkerConfig) {
	jobID := wc.RunJobID
	if wc.BookedJobID != 0 {
		jobID = strconv.FormatInt(wc.BookedJobID, 10)
	}
	st, _ := d.env.Inspect(c.VM)
	d.mu.Lock()
	d.launchesByVM[c.VM]++
	j, ok := d.jobs[jobID]
	if ok {
		j.VM, j.CPUs, j.MemoryMB, j.IP, j.Launched = c.VM, st.NumCPU, st.MemoryMB, st.IPAddress, time.Now()
		j.Launches++
		d.byWorker[c.VM] = j
		if clash := d.ipClashLocked(c.VM, st.IPAddress); clash != "" {
			d.ipClash = append(d.ipClash, clash)
		}
		if a := recordOf(st); a != nil && a.IPAddress != "" && a.IPAddress != st.IPAddress {
			d.ipMismatch = append(d.ipMismatch, fmt.Sprintf("%s: guest reports %q, annotation records %q", c.VM, st.IPAddress, a.IPAddress))
		}
	}
	d.mu.Unlock()
	if !ok {
		d.log.Warn("demo: launch for an unknown job", logkey.VM, c.VM, logkey.Job, jobID)
		return
	}
	mark := "ok"
	if st.NumCPU != j.WantCPUs || int64(st.MemoryMB) != j.WantMemoryMB {
		mark = fmt.Sprintf("MISMATCH, want %d vCPU / %d MB", j.WantCPUs, j.WantMemoryMB)
	}
	d.out.job(j, "VM %s, flavor %s: %d vCPU / %d MB (%s), ip %s, worker launched%s", c.VM, j.Flavor, st.NumCPU, st.MemoryMB, mark, st.IPAddress, d.forkNote(j, c.VM))

	// The script downloads the worker first (the models' commands do):
	// without it a real guest has no worker to start.
	urls, err := fetchWorker(ctx, c.Arguments)
	switch {
	case errors.Is(err, errNoDownload):
	case err != nil:
		if ctx.Err() == nil {
			d.log.Warn("demo: worker download failed", logkey.VM, c.VM, logkey.Job, jobID, logkey.Err, err)
		}
		return
	default:
		d.out.job(j, "worker downloaded from %s", strings.Join(urls, ", "))
	}
	// The worker signs in right after its launch, as a real one does.
	w, err := cdssim.StartWorker(ctx, d.api.URL(), cdssim.WorkerJob{
		Token: wc.APIToken, V1JobID: wc.BookedJobID, RunJobID: wc.RunJobID, Region: d.api.Region(), LogAddr: wc.GelfServiceAddr,
	})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("demo: worker sign-in refused", logkey.VM, c.VM, logkey.Job, jobID, logkey.Err, err)
		}
		return
	}
	d.out.job(j, "worker %s signed in, job building", c.VM)
	t := time.NewTimer(d.o.WorkerRunTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	if err := w.End(ctx, sdk.StatusSuccess); err != nil && ctx.Err() == nil {
		d.log.Warn("demo: worker result refused", logkey.VM, c.VM, logkey.Job, jobID, logkey.Err, err)
	}
	if err := d.powerOff(ctx, st.Ref); err != nil && ctx.Err() == nil {
		d.log.Warn("demo: power off worker vm", logkey.VM, c.VM, logkey.Err, err)
	}
	d.mu.Lock()
	j.Finished = time.Now()
	d.mu.Unlock()
	if j.Windows {
		d.out.job(j, "job finished (Success), worker's script ran `Stop-Computer -Force`: VM powered off")
	} else {
		d.out.job(j, "job finished (Success), worker ran `shutdown -h now`: VM powered off")
	}
	d.signal()
}

// ipClashLocked describes another live VM holding ip, "" when none.
func (d *driver) ipClashLocked(vm, ip string) string {
	if ip == "" {
		return ""
	}
	for _, v := range listVMs(d.env) {
		if v.Name != vm && v.IP == ip && v.PoweredOn {
			return fmt.Sprintf("%s and %s both hold %s", vm, v.Name, ip)
		}
	}
	return ""
}

// powerOff powers the VM off as its guest shutting down would.
func (d *driver) powerOff(ctx context.Context, ref types.ManagedObjectReference) error {
	vm := object.NewVirtualMachine(d.env.Admin.Client, ref)
	task, err := vm.PowerOff(ctx)
	if err != nil {
		return fmt.Errorf("power off %s: %w", ref.Value, err)
	}
	if err := task.Wait(ctx); err != nil {
		return fmt.Errorf("power off %s: %w", ref.Value, err)
	}
	return nil
}

// watchCleanup notices when the hatchery destroyed a finished worker's VM.
func (d *driver) watchCleanup(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A VM created after the listing starts is not in it: only a job
		// launched before then can be found lost (a fork is launched
		// within milliseconds of its creation, while a listing waits for
		// the folder locks of the clones in flight).
		listed := time.Now()
		live := map[string]bool{}
		for _, v := range listVMs(d.env) {
			live[v.Name] = true
		}
		var gone, lost, failed []*jobLife
		d.mu.Lock()
		for _, j := range d.order {
			if j.V1 && j.Launched.IsZero() && j.Failed.IsZero() && d.failedV1(j.JobID) {
				j.Failed = time.Now() // the hatchery gave up and failed it
				failed = append(failed, j)
			}
			if j.VM != "" && j.Finished.IsZero() && j.Lost.IsZero() && j.Launched.Before(listed) && !live[j.VM] {
				j.Lost = time.Now() // destroyed while its worker ran
				lost = append(lost, j)
			}
			if !j.Finished.IsZero() && j.Destroyed.IsZero() && !live[j.VM] {
				j.Destroyed = time.Now()
				gone = append(gone, j)
			}
		}
		d.mu.Unlock()
		for _, j := range lost {
			d.out.job(j, "ERROR: VM %s vanished while its worker was running", j.VM)
		}
		for _, j := range failed {
			d.out.job(j, "job failed by the hatchery after too many spawn attempts")
		}
		for _, j := range gone {
			d.out.job(j, "VM %s destroyed by the hatchery's cleanup (%s after queued)", j.VM, j.Destroyed.Sub(j.Queued).Round(100*time.Millisecond))
		}
		if len(gone)+len(lost)+len(failed) > 0 {
			d.signal()
		}
	}
}

// failedV1 reports whether the API holds a failed result for V1 job id.
func (d *driver) failedV1(id string) bool {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false
	}
	st, ok := d.api.JobV1(n)
	return ok && st.Status == sdk.StatusFail && len(st.Results) > 0
}

// report copies what the demo saw.
func (d *driver) report() *Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &Report{IPClashes: append([]string(nil), d.ipClash...), IPMismatches: append([]string(nil), d.ipMismatch...)}
	for _, j := range d.order {
		r.Jobs = append(r.Jobs, j.JobReport)
	}
	return r
}

func (j *jobLife) kind() string {
	if j.V1 {
		return "v1, flavor " + j.Flavor
	}
	if j.CloudInit {
		return "v2 cloud-init, flavor " + j.Flavor
	}
	if j.Instant {
		return "v2 instant clone, flavor " + j.Flavor
	}
	if j.Windows {
		return "v2 windows, flavor " + j.Flavor
	}
	return "v2, flavor " + j.Flavor
}

// JobReport is the life of one job as the demo saw it.
type JobReport struct {
	// Seq numbers jobs from 1 in feeding order.
	Seq int
	// JobID is the V1 job id (decimal) or the V2 run job id.
	JobID string
	// V1 tells a V1 job from a V2 job.
	V1 bool
	// CloudInit marks a V2 job on the cloud-init model: its worker boots
	// from the VM's guestinfo userdata, no guest operation.
	CloudInit bool
	// Windows marks a V2 job on the Windows model: its worker is launched
	// with PowerShell in a (simulated) Windows guest.
	Windows bool
	// Instant marks a V2 job on the instant-clone model; Forked, that its
	// worker's VM was forked from an instant parent (not a fallback clone).
	Instant, Forked bool
	// Flavor is the flavor the job resolves to; WantCPUs and WantMemoryMB
	// its size.
	Flavor       string
	WantCPUs     int32
	WantMemoryMB int64
	// VM is the worker VM; CPUs, MemoryMB and IP were read from the
	// simulator when the worker was launched.
	VM       string
	CPUs     int32
	MemoryMB int32
	IP       string
	// Launches counts the workers launched for the job, over every
	// instance of the hatchery (1 when all went well).
	Launches int
	// Times of the steps (zero: not reached). Lost is when the VM was
	// found gone while its worker still ran (a hatchery bug). Failed is
	// when the API was seen holding a failed result for a V1 job that
	// never got a worker (the hatchery gave up after
	// maxAttemptsNumberBeforeFailure spawn failures).
	Queued, Launched, Finished, Destroyed, Lost, Failed time.Time
}

// Report is what a demo run saw.
type Report struct {
	Jobs []JobReport
	// IPClashes lists launches whose IP another powered-on VM held.
	IPClashes []string
	// IPMismatches lists launches whose guest reported another address
	// than the one the VM's annotation records.
	IPMismatches []string
	// Checks are the end-of-run checks of a Once run with Options.Checks
	// (empty otherwise).
	Checks []Check
}

// Lost lists the jobs whose VM vanished while the worker ran.
func (r *Report) Lost() []JobReport {
	var out []JobReport
	for _, j := range r.Jobs {
		if !j.Lost.IsZero() {
			out = append(out, j)
		}
	}
	return out
}

// Failed counts the jobs the hatchery failed without a worker.
func (r *Report) Failed() int {
	n := 0
	for _, j := range r.Jobs {
		if !j.Failed.IsZero() {
			n++
		}
	}
	return n
}

// Done counts the jobs finished whose VM was destroyed.
func (r *Report) Done() int {
	n := 0
	for _, j := range r.Jobs {
		if !j.Destroyed.IsZero() {
			n++
		}
	}
	return n
}

// SimVM is a VM of the simulator as the demo and its tests look at it.
type SimVM struct {
	Name       string
	Template   bool
	PoweredOn  bool
	IP         string
	CPUs       int32                 // config.hardware.numCPU
	Annotation *inventory.Annotation // nil when not one of ours (annotation, else mirror)
	// InstantParent: the record marks the VM as an instant parent (its
	// instant_parent flag, naming the VM itself; instant.go).
	InstantParent bool
}

// ListVMs lists the simulator's VMs and templates from its registry.
func ListVMs(env *vcsimtest.Env) []SimVM { return listVMs(env) }

func listVMs(env *vcsimtest.Env) []SimVM {
	sctx := env.SimContext()
	var out []SimVM
	for _, vm := range env.VMs() { // complete VMs only: see vcsimtest.Env.VMs
		var v SimVM
		sctx.WithLock(vm, func() {
			v.Name = vm.Name
			v.PoweredOn = vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
			if g := vm.Guest; g != nil {
				v.IP = g.IpAddress
			}
			if c := vm.Config; c != nil {
				v.Template = c.Template
				v.CPUs = c.Hardware.NumCPU
				a, err := inventory.ParseAnnotation(c.Annotation)
				if err != nil {
					for _, ov := range c.ExtraConfig {
						if x := ov.GetOptionValue(); x != nil && x.Key == inventory.AnnotationMirrorKey {
							a, err = inventory.ParseAnnotation(fmt.Sprint(x.Value))
						}
					}
				}
				if err == nil {
					v.Annotation = a
					v.InstantParent = isParentRecord(a, a.HatcheryName, vm.Name)
				}
			}
		})
		out = append(out, v)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// printer writes the demo's lines, one per step, with the time since start.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	// quietJobs prints only a job's ERROR lines (a soak).
	quietJobs bool
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func (p *printer) job(j *jobLife, format string, args ...any) {
	if p.quietJobs && !strings.HasPrefix(format, "ERROR") {
		return
	}
	id := j.JobID
	if len(id) > 8 {
		id = id[:8]
	}
	p.printf("job %d (%s %s): %s", j.Seq, map[bool]string{true: "v1", false: "v2"}[j.V1], id, fmt.Sprintf(format, args...))
}

// banner prints where everything is.
func (p *printer) banner(mons, ctls []string, env *vcsimtest.Env, o Options) {
	p.mu.Lock()
	defer p.mu.Unlock()
	mon := mons[0]
	fmt.Fprintf(p.w, `hatchery-vsphere demo: the real hatchery against in-process vCenter and CDS API simulators

  /mon/status   %[1]s/mon/status
  /mon/metrics  %[1]s/mon/metrics
  /mon/workers  %[1]s/mon/workers

  vCenter simulator SDK  %[2]s
  user / password        %[3]s / %[4]s   (the simulator's own throwaway credentials)
  inspect with govc:     GOVC_URL=%[2]s GOVC_USERNAME='%[3]s' GOVC_PASSWORD='%[4]s' GOVC_INSECURE=1 govc ls /DC0/vm

  ctl socket    %[5]s
  operate it:   go run ./cmd/hatchery-vsphere ctl --socket %[5]s status   (vms, drain, ...)

`, mon, env.Endpoint, env.User, env.Password, ctls[0])
	if len(mons) > 1 {
		fmt.Fprintf(p.w, "%d instances of one hatchery name (logs: instance=1..%[1]d); /mon of each:", len(mons))
		for i, m := range mons {
			fmt.Fprintf(p.w, " %d=%s", i+1, m)
		}
		fmt.Fprint(p.w, "; ctl socket of each:")
		for i, c := range ctls {
			fmt.Fprintf(p.w, " %d=%s", i+1, c)
		}
		fmt.Fprint(p.w, "\n\n")
	}
	switch {
	case o.Soak > 0:
		fmt.Fprintf(p.w, "soak: feeding a job every %s for %s (every kind of model), then waiting for them to end; one line per sample, no job lines\n\n", o.JobEvery, o.Soak)
	case o.Jobs > 0:
		fmt.Fprintf(p.w, "feeding %d jobs (V2 flavors small/medium/large, cloud-init, Windows and instant-clone models, V1 jobs), one every %s\n\n", o.Jobs, o.JobEvery)
	default:
		fmt.Fprintf(p.w, "feeding a job every %s until interrupted (Ctrl-C)\n\n", o.JobEvery)
	}
}
