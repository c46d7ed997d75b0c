//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// The scenarios run in this order (go test runs a file's tests in the
// order they are written), on one real CDS and one simulated vCenter: the
// V1 model registered by the first is used by the later ones.

const (
	v1Model    = "vsphere-v1"
	v1ModelRef = "shared.infra/vsphere-v1"
)

// setupCDS creates what the scenarios need on the real API: the V1
// vSphere model of the peer's examples (its command is the API's own
// default form, `curl ... {{.API}}/download/worker/...`) and the
// pipelines and workflows of testdata/ and of the peer's examples.
func (s *suite) setupCDS(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(s.peer.dir, "examples", "v1", "model-vsphere.json"))
	if err != nil {
		return err
	}
	var model map[string]any
	if err := json.Unmarshal(b, &model); err != nil {
		return err
	}
	if err := s.peer.do(ctx, http.MethodPost, "/worker/model", model, nil); err != nil {
		return fmt.Errorf("create model %s: %w", v1Model, err)
	}
	imports := []string{
		"testdata/pip-two-steps.yml", "testdata/wf-two-steps.yml",
		"testdata/pip-fails.yml", "testdata/wf-fails.yml",
		"testdata/pip-long.yml", "testdata/wf-long.yml",
		filepath.Join(s.peer.dir, "examples/v1/pip.yml"), filepath.Join(s.peer.dir, "examples/v1/wf1.yml"),
		filepath.Join(s.peer.dir, "examples/v1/pip-other.yml"), filepath.Join(s.peer.dir, "examples/v1/wf-other.yml"),
	}
	for _, f := range imports {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		kind := "pipeline"
		if strings.HasPrefix(filepath.Base(f), "wf") {
			kind = "workflow"
		}
		if _, err := s.peer.cdsctl(ctx, "", kind, "import", s.peer.cfg.Project, abs); err != nil {
			return err
		}
	}
	return nil
}

// scenario records the outcome of one scenario and prints its line. A
// healthy run logs no WARN nor ERROR: a line at those levels that the
// daemon logs during the scenario fails it, unless warns says the scenario
// provokes them (a job that cannot start).
func scenario(t *testing.T, what string, warns ...bool) {
	t.Helper()
	start := time.Now()
	from := len(logLines(s.logPath))
	t.Cleanup(func() {
		if len(warns) == 0 || !warns[0] {
			lines := logLines(s.logPath)
			for _, l := range lines[min(from, len(lines)):] {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					t.Errorf("daemon logged: %s", l)
				}
			}
		}
		verdict := "PASS"
		if t.Failed() {
			verdict = "FAIL"
			s.mu.Lock()
			s.failed++
			s.mu.Unlock()
			t.Logf("daemon log, last lines:\n%s", strings.Join(lastLines(logLines(s.logPath), 60), "\n"))
		}
		line := fmt.Sprintf("conformance: %s %s — %s (%s)", verdict, t.Name(), what, time.Since(start).Round(100*time.Millisecond))
		s.mu.Lock()
		s.results = append(s.results, line)
		s.mu.Unlock()
		fmt.Println(line)
	})
}

func lastLines(l []string, n int) []string {
	if len(l) > n {
		return l[len(l)-n:]
	}
	return l
}

// running returns the daemon, started if it is not running.
func (s *suite) running(t *testing.T) *daemon {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d != nil {
		select {
		case <-s.d.done:
			t.Fatalf("the daemon exited: %v", s.d.err)
		default:
			return s.d
		}
	}
	d, err := startDaemon(context.Background(), s.bin, s.cfgPath, s.logPath, s.secrets, s.monPort)
	if err != nil {
		t.Fatalf("start the daemon: %v", err)
	}
	s.d = d
	return d
}

// stopDaemon sends SIGTERM to the daemon and waits for its exit.
func (s *suite) stopDaemon(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	d := s.d
	s.d = nil
	s.mu.Unlock()
	if d == nil {
		return
	}
	if err := d.stop(); err != nil {
		t.Fatalf("daemon stop: %v", err)
	}
}

// waitFor checks cond every half second until it holds or timeout
// passes: the state waited for is in the real API or in the simulator,
// which announce nothing to the suite.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (last: %s)", what, timeout, last)
		}
		<-tick.C
	}
}

// v1Final waits for run n of wf to end and returns it.
func (s *suite) v1Final(t *testing.T, wf string, n int, timeout time.Duration) v1Run {
	t.Helper()
	var r v1Run
	waitFor(t, timeout, fmt.Sprintf("V1 run %s #%d ends", wf, n), func() (bool, string) {
		var err error
		r, err = s.peer.v1RunOf(context.Background(), wf, n)
		if err != nil {
			return false, err.Error()
		}
		switch r.Status {
		case "Success", "Fail", "Stopped":
			return true, r.Status
		}
		return false, r.Status
	})
	return r
}

// runV1ToEnd starts workflow wf and waits for the run to end.
func (s *suite) runV1ToEnd(t *testing.T, wf string) (int, v1Run) {
	t.Helper()
	n, err := s.peer.runV1(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	return n, s.v1Final(t, wf, n, 3*time.Minute)
}

// v1Logs waits until the CDN logs of run n of wf hold every string of
// want and returns them. The CDN completes a step's log item after the
// job's end (a download right after it answers 404 for the last step), and
// a step that never ran has none: the download is repeated until the
// content is there, whatever cdsctl says of the other steps.
func (s *suite) v1Logs(t *testing.T, wf string, n int, want ...string) string {
	t.Helper()
	return s.logsHolding(t, want, "workflow", "logs", "download", s.peer.cfg.Project, wf, fmt.Sprint(n))
}

// v2Logs is v1Logs for a V2 run.
func (s *suite) v2Logs(t *testing.T, j v2Job, want ...string) string {
	t.Helper()
	return s.logsHolding(t, want, "experimental", "workflow", "logs", "download", s.peer.cfg.Project, j.RunID)
}

// logsHolding runs `cdsctl args` in a new directory until the files it
// wrote hold every string of want (at most a minute).
func (s *suite) logsHolding(t *testing.T, want []string, args ...string) string {
	t.Helper()
	var logs string
	waitFor(t, time.Minute, "CDN logs holding "+strings.Join(want, ", "), func() (bool, string) {
		dir, err := os.MkdirTemp(t.TempDir(), "logs-")
		if err != nil {
			t.Fatal(err)
		}
		_, cerr := s.peer.cdsctl(context.Background(), dir, args...)
		logs = readAll(t, dir)
		for _, w := range want {
			if !strings.Contains(logs, w) {
				return false, fmt.Sprintf("no %q in %q (cdsctl: %v)", w, logs, cerr)
			}
		}
		return true, ""
	})
	return logs
}

func readAll(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		c, err := os.ReadFile(p)
		b.WriteString("== " + filepath.Base(p) + "\n" + string(c) + "\n")
		return err
	})
	if err != nil {
		t.Fatalf("read logs: %v", err)
	}
	return b.String()
}

// v2Final waits for a V2 job to end and returns its status.
func (s *suite) v2Final(t *testing.T, j v2Job, timeout time.Duration) string {
	t.Helper()
	var job string
	waitFor(t, timeout, fmt.Sprintf("V2 job of %s ends", j.Workflow), func() (bool, string) {
		_, st, err := s.peer.v2Status(context.Background(), j)
		if err != nil {
			return false, err.Error()
		}
		job = st
		switch st {
		case "Success", "Fail", "Stopped", "Cancelled", "Skipped":
			return true, st
		}
		return false, st
	})
	return job
}

// workerVMs lists the simulator's VMs that are not templates.
func (s *suite) workerVMs() []string {
	var out []string
	sctx := s.env.SimContext()
	for _, vm := range s.env.VMs() {
		sctx.WithLock(vm, func() {
			if vm.Config != nil && !vm.Config.Template {
				out = append(out, fmt.Sprintf("%s (%s)", vm.Name, vm.Runtime.PowerState))
			}
		})
	}
	return out
}

// noLeak waits until the cleanup has removed every worker VM and no
// guest process runs.
func (s *suite) noLeak(t *testing.T) {
	t.Helper()
	waitFor(t, 90*time.Second, "every worker VM destroyed and no guest process left", func() (bool, string) {
		vms, procs := s.workerVMs(), s.env.Runner.Running()
		return len(vms) == 0 && len(procs) == 0, fmt.Sprintf("vms %v, guest processes in %v", vms, procs)
	})
}

// readableSpawnInfos fails when a spawn info of the job reads garbled in
// the CDS UI (a wrong argument count renders as %!s(MISSING) or
// %!(EXTRA ...)).
func readableSpawnInfos(t *testing.T, j v1RunJob) {
	t.Helper()
	for _, si := range j.SpawnInfos {
		if strings.Contains(si.UserMessage, "%!") {
			t.Errorf("job %d: spawn info %s %q reads %q", j.ID, si.Message.ID, si.Message.Args, si.UserMessage)
		}
	}
}

func TestV1ModelRegistersWithTheAPIsDefaultCommand(t *testing.T) {
	scenario(t, "a V1 model whose command uses {{.API}} is registered by a real `worker register`")
	s.running(t)
	waitFor(t, 3*time.Minute, "model "+v1ModelRef+" registered", func() (bool, string) {
		var m struct {
			NeedRegistration bool   `json:"need_registration"`
			RegisteredOS     string `json:"registered_os"`
			NbSpawnErr       int    `json:"nb_spawn_err"`
			LastSpawnErr     string `json:"last_spawn_err"`
		}
		if err := s.peer.do(context.Background(), http.MethodGet, "/worker/model/"+v1ModelRef, nil, &m); err != nil {
			return false, err.Error()
		}
		if m.NbSpawnErr > 0 {
			t.Fatalf("the API recorded %d spawn errors for the model: %s", m.NbSpawnErr, m.LastSpawnErr)
		}
		return !m.NeedRegistration && m.RegisteredOS != "", fmt.Sprintf("need_registration %v, registered_os %q", m.NeedRegistration, m.RegisteredOS)
	})
}

func TestV1JobTwoStepsSuccessWithLogsInCDN(t *testing.T) {
	scenario(t, "a V1 job of two steps ends Success, both steps' logs in CDN")
	s.running(t)
	n, r := s.runV1ToEnd(t, "wf-two-steps")
	if r.Status != "Success" {
		t.Fatalf("run ended %s", r.Status)
	}
	for _, j := range r.jobs() {
		readableSpawnInfos(t, j)
	}
	s.v1Logs(t, "wf-two-steps", n, "conformance step one on", "conformance step two says goodbye")
	s.noLeak(t)
}

func TestV1JobWhoseStepFailsEndsFailWithLogs(t *testing.T) {
	scenario(t, "a V1 job whose step fails ends Fail, its log in CDN")
	s.running(t)
	n, r := s.runV1ToEnd(t, "wf-fails")
	if r.Status != "Fail" {
		t.Fatalf("run ended %s, want Fail", r.Status)
	}
	logs := s.v1Logs(t, "wf-fails", n, "conformance step about to fail")
	if strings.Contains(logs, "conformance step never run") {
		t.Errorf("the step after the failure ran:\n%s", logs)
	}
	s.noLeak(t)
}

func TestV2JobRunsOnStringSuccess(t *testing.T) {
	scenario(t, "a V2 job whose runs-on is a string (no memory, no flavor) downloads the worker and ends Success, logs in CDN")
	s.running(t)
	j, err := s.peer.injectV2(context.Background(), "wf-v2-string", linuxTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.v2Final(t, j, 3*time.Minute); st != "Success" {
		infos, _ := s.peer.v2Infos(context.Background(), j)
		t.Fatalf("job ended %s; infos %q", st, infos)
	}
	s.v2Logs(t, j, "hello from v2")
	s.noLeak(t)
}

func TestV2JobRunsOnObjectSuccess(t *testing.T) {
	scenario(t, "a V2 job whose runs-on is an object (a flavor) ends Success on that flavor, logs in CDN")
	s.running(t)
	j, err := s.peer.injectV2(context.Background(), "wf-v2-object", linuxTemplate, "", "medium")
	if err != nil {
		t.Fatal(err)
	}
	var cpus int32
	done := make(chan struct{})
	go func() { // the flavor's size, read while the worker VM exists
		defer close(done)
		deadline := time.After(3 * time.Minute)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for cpus == 0 {
			sctx := s.env.SimContext()
			for _, vm := range s.env.VMs() {
				sctx.WithLock(vm, func() {
					if vm.Config != nil && !vm.Config.Template && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
						cpus = vm.Config.Hardware.NumCPU
					}
				})
			}
			select {
			case <-deadline:
				return
			case <-tick.C:
			}
		}
	}()
	st := s.v2Final(t, j, 3*time.Minute)
	<-done
	if st != "Success" {
		infos, _ := s.peer.v2Infos(context.Background(), j)
		t.Fatalf("job ended %s; infos %q", st, infos)
	}
	if cpus != 4 {
		t.Errorf("worker VM had %d vCPUs, want the medium flavor's 4", cpus)
	}
	s.v2Logs(t, j, "hello from v2")
	s.noLeak(t)
}

func TestCloudInitModelJobSuccess(t *testing.T) {
	scenario(t, "a job on a cloud-init model (no guest operations) ends Success, logs in CDN")
	s.running(t)
	before := len(s.env.CloudInit.Boots())
	j, err := s.peer.injectV2(context.Background(), "wf-v2-cloud", cloudTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.v2Final(t, j, 3*time.Minute); st != "Success" {
		infos, _ := s.peer.v2Infos(context.Background(), j)
		t.Fatalf("job ended %s; infos %q", st, infos)
	}
	if n := len(s.env.CloudInit.Boots()); n != before+1 {
		t.Errorf("cloud-init boots: %d new, want 1", n-before)
	}
	s.v2Logs(t, j, "hello from v2")
	s.noLeak(t)
}

// TestWindowsModelJobLaunchScriptAndConfig: a V2 job on the Windows model
// (os = "windows"), booked against the real API. A Windows guest cannot
// run here, and the peer's worker is a Linux binary: the suite checks what
// the (simulated) Windows guest was given — a PowerShell launch its fake
// accepted (constant command line, nothing secret on it), whose script
// downloads the worker for windows/amd64 from the API the worker reaches
// and powers the VM off at the end, and whose CDS_CONFIG is the job's
// worker config — then runs the real Linux worker with that very
// CDS_CONFIG in place of worker.exe: the job must end Success with its log
// in CDN, which proves the config a Windows guest gets is one the real API
// accepts. The VM is powered off when that worker ends, as the script's
// Stop-Computer would.
func TestWindowsModelJobLaunchScriptAndConfig(t *testing.T) {
	scenario(t, "a job on a Windows model: the PowerShell launch and its config checked, the config run by the real (Linux) worker, Success, logs in CDN")
	s.running(t)
	j, err := s.peer.injectV2(context.Background(), "wf-v2-windows", windowsTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var launch vcsimtest.WindowsLaunch
	waitFor(t, 3*time.Minute, "the Windows guest's worker launch", func() (bool, string) {
		for _, l := range s.env.Guest.WindowsLaunches() {
			if l.Config.RunJobID == j.RunJobID {
				launch = l
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Windows launches", len(s.env.Guest.WindowsLaunches()))
	})
	api := strings.TrimRight(s.peer.cfg.APIURL, "/")
	if launch.Config.APIEndpoint != s.peer.cfg.APIURL {
		t.Errorf("worker config API %q, want the workers' %q", launch.Config.APIEndpoint, s.peer.cfg.APIURL)
	}
	if launch.Config.APIToken == "" || launch.Config.GelfServiceAddr == "" {
		t.Errorf("worker config lacks its token or its CDN log address")
	}
	for _, want := range []string{`"` + api + `/download/worker/windows/amd64" -OutFile .\worker.exe`, `& .\worker.exe`, "} finally {\n  Stop-Computer -Force\n}"} {
		if !strings.Contains(launch.Script, want) {
			t.Errorf("launch script lacks %q:\n%s", want, launch.Script)
		}
	}
	if strings.Contains(launch.Script, launch.Config.APIToken) {
		t.Errorf("the launch script holds the worker token (it belongs in CDS_CONFIG only)")
	}
	for _, c := range s.env.Guest.CallsFor(launch.VM) {
		if !c.Windows || c.Fault != nil {
			t.Errorf("guest call %s %s: windows %v, fault %v", c.ProgramPath, c.Arguments, c.Windows, c.Fault)
		}
		if strings.Contains(c.ProgramPath+" "+c.Arguments, launch.Config.APIToken) {
			t.Errorf("the worker token is on a command line")
		}
	}
	// What the real API answers for the Windows worker (the peer holds the
	// linux/amd64 build only): logged, not required.
	if resp, err := http.Get(api + "/download/worker/windows/amd64"); err == nil {
		resp.Body.Close()
		t.Logf("the API answers %d for the windows/amd64 worker", resp.StatusCode)
	}

	// The Linux worker stands in for worker.exe, with the Windows launch's
	// config; the runner powers the VM off when it ends.
	st, ok := s.env.Inspect(launch.VM)
	if !ok {
		t.Fatalf("vm %q of the launch is gone", launch.VM)
	}
	script := `curl -fsSL --retry 10 --retry-max-time 120 -o ./worker "` + api + `/download/worker/linux/amd64" && chmod +x ./worker && ./worker`
	if err := s.env.Runner.RunInGuest(st.Ref, launch.VM, script, []string{"CDS_CONFIG=" + launch.Config.EncodeBase64()}); err != nil {
		t.Fatal(err)
	}
	if st := s.v2Final(t, j, 3*time.Minute); st != "Success" {
		infos, _ := s.peer.v2Infos(context.Background(), j)
		t.Fatalf("job ended %s; infos %q", st, infos)
	}
	s.v2Logs(t, j, "hello from v2")
	s.noLeak(t)
}

func TestRegionFilters(t *testing.T) {
	scenario(t, "a hatchery of region R serves a job without region and leaves a job of region OTHER alone")
	s.running(t)
	ctx := context.Background()
	other, err := s.peer.runV1(ctx, "wf-other")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.peer.runV1(ctx, "wf1")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.v1Final(t, "wf1", plain, 3*time.Minute); r.Status != "Success" {
		t.Fatalf("the job without region ended %s", r.Status)
	}
	r, err := s.peer.v1RunOf(ctx, "wf-other", other)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := s.peer.queuedV1(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.jobs() {
		if j.Status != "Waiting" {
			t.Errorf("job %d of region OTHER is %s, want Waiting", j.ID, j.Status)
		}
		if by := queue[j.ID]; by != "" {
			t.Errorf("job %d of region OTHER booked by %q", j.ID, by)
		}
		for _, si := range j.SpawnInfos {
			if strings.Contains(si.UserMessage, s.peer.cfg.HatcheryName) {
				t.Errorf("job %d of region OTHER has our spawn info %q", j.ID, si.UserMessage)
			}
		}
	}
	// Stop the OTHER run so that no later scenario sees it in the queue.
	if err := s.peer.do(ctx, http.MethodPost, fmt.Sprintf("/project/%s/workflows/wf-other/runs/%d/stop", s.peer.cfg.Project, other), nil, nil); err != nil {
		t.Errorf("stop the OTHER run: %v", err)
	}
	s.noLeak(t)
}

func TestJobThatCannotStartIsFailedReadably(t *testing.T) {
	scenario(t, "a V1 job whose worker cannot start is failed after maxAttemptsNumberBeforeFailure, its spawn infos readable", true)
	s.running(t)
	// Every guest refuses the login for the next two launches: each spawn
	// fails at its first guest operation.
	s.env.Guest.FailNext(new(types.InvalidGuestLogin), new(types.InvalidGuestLogin))
	_, r := s.runV1ToEnd(t, "wf-two-steps")
	if r.Status != "Fail" {
		t.Fatalf("run ended %s, want Fail", r.Status)
	}
	var msgs []string
	for _, j := range r.jobs() {
		readableSpawnInfos(t, j)
		for _, si := range j.SpawnInfos {
			msgs = append(msgs, si.UserMessage)
		}
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"Hatchery " + s.peer.cfg.HatcheryName + " starts spawn worker", "guest refused the credentials", "Job execution failed by hatchery " + s.peer.cfg.HatcheryName} {
		if !strings.Contains(all, want) {
			t.Errorf("spawn infos lack %q:\n%s", want, all)
		}
	}
	s.noLeak(t)
}

func TestRestartWhileAJobRuns(t *testing.T) {
	scenario(t, "the hatchery restarted while a job runs: the job ends Success, nothing leaks")
	s.running(t)
	ctx := context.Background()
	n, err := s.peer.runV1(ctx, "wf-long")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the long job is Building", func() (bool, string) {
		r, err := s.peer.v1RunOf(ctx, "wf-long", n)
		if err != nil {
			return false, err.Error()
		}
		for _, j := range r.jobs() {
			return j.Status == "Building", j.Status
		}
		return false, "no job"
	})
	s.stopDaemon(t)
	s.running(t)
	r := s.v1Final(t, "wf-long", n, 3*time.Minute)
	if r.Status != "Success" {
		t.Fatalf("run ended %s", r.Status)
	}
	s.v1Logs(t, "wf-long", n, "conformance long step survived the restart")
	s.noLeak(t)
}

func TestSIGTERMWithJobsBooked(t *testing.T) {
	scenario(t, "SIGTERM with jobs booked: the daemon exits in time, no job stays booked, every job ends Success after a restart")
	s.running(t)
	ctx := context.Background()
	// The workers' guests never get ready: the three spawns stay in
	// flight, their jobs booked, until the SIGTERM.
	s.env.SetGuestNeverReady(v1ModelRef, true)
	restored := false
	defer func() {
		if !restored {
			s.env.SetGuestNeverReady(v1ModelRef, false)
		}
	}()
	var jobs []int64
	runs := map[int64]int{}
	for range 3 {
		n, err := s.peer.runV1(ctx, "wf-two-steps")
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		waitFor(t, 30*time.Second, fmt.Sprintf("run %d has its job", n), func() (bool, string) {
			r, err := s.peer.v1RunOf(ctx, "wf-two-steps", n)
			if err != nil {
				return false, err.Error()
			}
			for _, j := range r.jobs() {
				id = j.ID
				return true, ""
			}
			return false, r.Status
		})
		jobs = append(jobs, id)
		runs[id] = n
	}
	waitFor(t, 2*time.Minute, "the three jobs booked by the hatchery", func() (bool, string) {
		q, err := s.peer.queuedV1(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, id := range jobs {
			if q[id] != s.peer.cfg.HatcheryName {
				return false, fmt.Sprintf("queue %v", q)
			}
		}
		return true, ""
	})
	start := time.Now()
	s.stopDaemon(t)
	t.Logf("daemon stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	q, err := s.peer.queuedV1(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range jobs {
		by, queued := q[id]
		if !queued {
			t.Errorf("job %d left the queue: its spawn was in flight, it must wait for a worker again", id)
		}
		if by != "" {
			t.Errorf("job %d still booked by %q after the hatchery stopped", id, by)
		}
	}
	s.env.SetGuestNeverReady(v1ModelRef, false)
	restored = true
	s.running(t)
	for _, id := range jobs {
		if r := s.v1Final(t, "wf-two-steps", runs[id], 3*time.Minute); r.Status != "Success" {
			t.Errorf("run %d ended %s", runs[id], r.Status)
		}
	}
	s.noLeak(t)
}
