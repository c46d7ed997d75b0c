package vcsimtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
)

// GuestRunner makes the simulated guests real enough for a real CDS
// worker: what the hatchery launches in a guest (the program of a
// StartProgramInGuest call, or the runcmd of a cloud-init userdata) runs
// as a process group on this machine, in a directory of the VM's own, and
// the VM is powered off when the last process of that group ends — as a
// guest whose script ends with `shutdown` does. vcsim runs no guest at all
// (its StartProgramInGuest needs Docker): this is a test-code extension,
// for the conformance suite (docs/conformance.md).
//
// What a process sees:
//   - its working directory: Root/g<n>, new for every launch (so a
//     template never holds a worker binary: a script must download it);
//   - the environment Env, HOME (that directory) and TMPDIR (its t/: the
//     worker's default basedir, which concurrent guests must not share),
//     then the call's EnvVariables (CDS_CONFIG);
//   - a PATH starting with a directory of shims: `sudo` runs its
//     arguments, `shutdown` does nothing (the power-off follows the end of
//     the script), as the guest's real ones would from the script's point
//     of view;
//   - for cloud-init, the userdata's files written under that directory
//     (their absolute paths, in the files and in runcmd, rewritten to it).
//
// A VM powered off or destroyed by anyone else (the hatchery) kills its
// processes, as a real power-off would. Close kills what still runs.
type GuestRunner struct {
	root   string
	shims  string
	env    []string
	client *vim25.Client // Env.Admin's, for the power-off
	ctx    context.Context
	logger io.Writer

	mu    sync.Mutex
	seq   int
	procs map[types.ManagedObjectReference]*guestProc
	wg    sync.WaitGroup
	runs  record[GuestRun]
}

// GuestRunnerOptions configure a GuestRunner (Options.Runner).
type GuestRunnerOptions struct {
	// Root holds one directory per launch; it must exist.
	Root string
	// Env is the environment every process starts with (PATH is replaced:
	// the shims first, then PATH of Env, else /usr/bin:/bin).
	Env []string
	// Log, when set, receives one line per launch and per end.
	Log io.Writer
}

// GuestRun is one launch the runner ran, recorded when it ended.
type GuestRun struct {
	VM string
	// Dir is the launch's working directory (its output in Dir/guest.log
	// for guest operations, in the userdata's log path for cloud-init).
	Dir string
	// CloudInit tells a cloud-init runcmd from a guest-operations program.
	CloudInit bool
	// Err is the error of the launched shell (nil when it exited 0).
	Err error
	// Killed tells that the VM was powered off (or destroyed) while the
	// processes ran.
	Killed bool
}

type guestProc struct {
	vm     string
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool
}

// newGuestRunner prepares the shims under o.Root.
func newGuestRunner(e *Env, o GuestRunnerOptions) (*GuestRunner, error) {
	if o.Root == "" {
		return nil, errors.New("guest runner: Root is empty")
	}
	shims := filepath.Join(o.Root, ".shims")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		return nil, fmt.Errorf("guest runner: %w", err)
	}
	for name, body := range map[string]string{
		"sudo":     "#!/bin/sh\nexec \"$@\"\n",
		"shutdown": "#!/bin/sh\n# the runner powers the VM off when the script ends\nexit 0\n",
	} {
		if err := os.WriteFile(filepath.Join(shims, name), []byte(body), 0o755); err != nil {
			return nil, fmt.Errorf("guest runner: %w", err)
		}
	}
	path := "/usr/bin:/bin"
	var env []string
	for _, kv := range o.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+shims+":"+path)
	return &GuestRunner{root: o.Root, shims: shims, env: env, ctx: e.ctx, logger: o.Log,
		procs: map[types.ManagedObjectReference]*guestProc{}}, nil
}

// Runs returns every launch that ended, oldest first.
func (r *GuestRunner) Runs() []GuestRun { return r.runs.all() }

// WaitForRuns blocks until at least n launches ended or ctx ends.
func (r *GuestRunner) WaitForRuns(ctx context.Context, n int) ([]GuestRun, error) {
	return r.runs.wait(ctx, n)
}

// Running returns the names of the VMs whose processes still run.
func (r *GuestRunner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.procs {
		out = append(out, p.vm)
	}
	return out
}

func (r *GuestRunner) logf(format string, args ...any) {
	if r.logger != nil {
		fmt.Fprintf(r.logger, "guest runner: "+format+"\n", args...)
	}
}

// newDir makes the working directory of one launch in vm.
func (r *GuestRunner) newDir(vm string) (string, error) {
	r.mu.Lock()
	r.seq++
	n := r.seq
	r.mu.Unlock()
	// Short: the worker starts its plugins on unix sockets under TMPDIR,
	// whose paths may not exceed 107 bytes.
	dir := filepath.Join(r.root, fmt.Sprintf("g%d", n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// launchProgram runs what a StartProgramInGuest asked: the guest's shell
// runs "<program> <arguments>" (VMware Tools on Linux start the program
// through /bin/sh).
func (r *GuestRunner) launchProgram(ref types.ManagedObjectReference, vm string, spec *types.GuestProgramSpec) error {
	dir, err := r.newDir(vm)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(dir, "guest.log"))
	if err != nil {
		return err
	}
	line := strings.TrimSpace(spec.ProgramPath + " " + spec.Arguments)
	return r.start(ref, vm, dir, []string{"/bin/sh", "-c", line}, spec.EnvVariables, out, false)
}

// RunInGuest runs script through /bin/sh in vm (reference ref) as a
// launch there would run, with env after the runner's environment, and
// powers the VM off when it ends. It is for a guest the runner does not
// play, a Windows one: this machine has no PowerShell, so a test that has
// checked what a Windows guest was given runs a Linux equivalent of it
// here (the conformance suite's Windows scenario, docs/conformance.md).
func (r *GuestRunner) RunInGuest(ref types.ManagedObjectReference, vm, script string, env []string) error {
	dir, err := r.newDir(vm)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(dir, "guest.log"))
	if err != nil {
		return err
	}
	return r.start(ref, vm, dir, []string{"/bin/sh", "-c", script}, env, out, false)
}

// launchCloudInit plays what cloud-init does with a userdata on a first
// boot: write_files, then each runcmd entry, with the files' absolute
// paths (and the log path) rewritten under the launch's directory.
func (r *GuestRunner) launchCloudInit(ref types.ManagedObjectReference, vm string, cc cloudinit.Userdata) error {
	dir, err := r.newDir(vm)
	if err != nil {
		return err
	}
	paths := []string{cloudinit.LogPath}
	for _, f := range cc.WriteFiles {
		paths = append(paths, f.Path)
	}
	rewrite := func(s string) string {
		for _, p := range paths {
			s = strings.ReplaceAll(s, p, filepath.Join(dir, p))
		}
		return s
	}
	for _, f := range cc.WriteFiles {
		mode := os.FileMode(0o644)
		if f.Permissions != "" {
			var m uint32
			if _, err := fmt.Sscanf(f.Permissions, "%o", &m); err != nil {
				return fmt.Errorf("write_files %s: permissions %q: %w", f.Path, f.Permissions, err)
			}
			mode = os.FileMode(m)
		}
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(rewrite(f.Content)), mode); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(cloudinit.LogPath)), 0o700); err != nil {
		return err
	}
	var script strings.Builder
	for _, c := range cc.Runcmd {
		args := make([]string, len(c))
		for i, a := range c {
			args[i] = shellQuote(rewrite(a))
		}
		script.WriteString(strings.Join(args, " ") + "\n")
	}
	return r.start(ref, vm, dir, []string{"/bin/sh", "-c", script.String()}, nil, io.Discard, true)
}

// plainWord is a shell word that needs no quotes.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./=:-]+$`)

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// start runs argv as a new process group and follows it: the group's end
// is seen when every process holding the inherited pipe (fd 3) has exited,
// which covers a script that detaches (nohup ... &), with no polling.
func (r *GuestRunner) start(ref types.ManagedObjectReference, vm, dir string, argv, env []string, out io.Writer, ci bool) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	// A guest has a disk of its own: the worker's basedir (its default is
	// the temporary directory) must not be shared between guests.
	tmp := filepath.Join(dir, "t")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		pr.Close()
		pw.Close()
		return err
	}
	cmd.Env = append(append(append([]string{}, r.env...), "HOME="+dir, "TMPDIR="+tmp), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return err
	}
	pw.Close()
	p := &guestProc{vm: vm, cmd: cmd, done: make(chan struct{})}
	r.mu.Lock()
	if old := r.procs[ref]; old != nil {
		r.killLocked(old)
	}
	r.procs[ref] = p
	r.mu.Unlock()
	r.logf("%s: started in %s", vm, dir)

	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		waitErr := cmd.Wait()
		_, _ = io.Copy(io.Discard, pr) // EOF once the last holder of fd 3 exits
		pr.Close()
		if c, ok := out.(io.Closer); ok {
			c.Close()
		}
		r.mu.Lock()
		killed := p.killed
		if r.procs[ref] == p {
			delete(r.procs, ref)
		}
		r.mu.Unlock()
		close(p.done)
		r.logf("%s: ended (err %v, killed %v)", vm, waitErr, killed)
		if !killed {
			r.powerOff(ref, vm)
		}
		r.runs.add(GuestRun{VM: vm, Dir: dir, CloudInit: ci, Err: waitErr, Killed: killed})
	}()
	return nil
}

// powerOff powers vm off as its guest's shutdown would; a VM already off
// or gone is left as it is.
func (r *GuestRunner) powerOff(ref types.ManagedObjectReference, vm string) {
	if r.client == nil || r.ctx.Err() != nil {
		return
	}
	// Bounded: one power-off task on the simulator.
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	v := object.NewVirtualMachine(r.client, ref)
	state, err := v.PowerState(ctx)
	if err != nil || state != types.VirtualMachinePowerStatePoweredOn {
		return
	}
	task, err := v.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		r.logf("%s: power off after the script: %v", vm, err)
	}
}

// stopped kills the processes of a VM that was powered off or destroyed.
func (r *GuestRunner) stopped(ref types.ManagedObjectReference) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[ref]; p != nil {
		r.killLocked(p)
	}
}

func (r *GuestRunner) killLocked(p *guestProc) {
	if p.killed {
		return
	}
	p.killed = true
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// close kills every process group still running and joins the followers.
func (r *GuestRunner) close() {
	r.mu.Lock()
	for _, p := range r.procs {
		r.killLocked(p)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// runnerVMStopped is called by the readiness handler on every power
// change to a state other than poweredOn.
func (e *Env) runnerVMStopped(ref types.ManagedObjectReference) {
	if e.Runner != nil {
		e.Runner.stopped(ref)
	}
}

// runnerLaunch starts spec in vm when a runner is installed and the
// program is not the readiness probe (`env`), which only has to start.
func (f *FakeGuest) runnerLaunch(ref types.ManagedObjectReference, vm string, spec *types.GuestProgramSpec) error {
	if f.runner == nil || spec == nil || spec.ProgramPath == "/usr/bin/env" {
		return nil
	}
	return f.runner.launchProgram(ref, vm, spec)
}

// runnerBoot plays a cloud-init userdata when a runner is installed.
func (f *FakeCloudInit) runnerBoot(ctx *simulator.Context, vm *simulator.VirtualMachine, ud []byte) {
	if f.runner == nil || len(ud) == 0 {
		return
	}
	cc, err := cloudinit.ParseCloudConfig(ud)
	if err != nil {
		f.runner.logf("%s: userdata: %v", vm.Name, err)
		return
	}
	if err := f.runner.launchCloudInit(vm.Reference(), vm.Name, cc); err != nil {
		f.runner.logf("%s: cloud-init: %v", vm.Name, err)
	}
}
