package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"
)

// readinessTimeouts bounds each readiness stage of a new worker VM (001
// §9.1). Tests shorten them; production code only reads them.
type readinessTimeouts struct {
	// GuestOps bounds the wait for guest.guestOperationsReady: boot,
	// customization reboot and VMware Tools start take a minute or two.
	GuestOps time.Duration
	// IP bounds the wait for the guest to report its (expected) IPv4
	// address once tools run: the customized network comes up after them.
	IP time.Duration
	// Env bounds the retries of `env` in the guest: tools may report ready
	// before they accept process starts.
	Env time.Duration
	// EnvRetry is the pause between two `env` attempts.
	EnvRetry time.Duration
	// RegisterShutdown bounds a registration: the worker registers the
	// model (downloads, capability probe) then PostCmd shuts the VM down.
	RegisterShutdown time.Duration
	// Cleanup bounds the power-off made after a failure, on a context
	// detached from the (possibly cancelled) spawn context.
	Cleanup time.Duration
	// Resume bounds each stage of the check of a claimed hot pool VM
	// (guest operations ready, its IP): a resumed guest was running
	// already and answers within seconds; one that does not is broken.
	Resume time.Duration
}

// readiness are the timeouts in use.
var readiness = readinessTimeouts{
	GuestOps:         3 * time.Minute,
	IP:               3 * time.Minute,
	Env:              1 * time.Minute,
	EnvRetry:         5 * time.Second,
	RegisterShutdown: 15 * time.Minute,
	Cleanup:          1 * time.Minute,
	Resume:           30 * time.Second,
}

// Guest programs.
const (
	// envProgram checks that guest operations really run processes.
	envProgram = "/usr/bin/env"
	// launchProgram is the program the worker script is run through: the
	// guest's shell runs "/bin/echo -n ;<script>" (docs/architecture.md).
	launchProgram = "/bin/echo"
	// cdsConfigEnv is the environment variable holding the worker config.
	cdsConfigEnv = "CDS_CONFIG"
)

// errGuestLogin marks a spawn failure caused by the guest refusing the
// credentials (InvalidGuestLogin): retrying does not help.
var errGuestLogin = errors.New("guest refused the credentials")

// spawnStepError is a failure of one step of a spawn.
type spawnStepError struct {
	Step string
	Err  error
}

func (e *spawnStepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *spawnStepError) Unwrap() error { return e.Err }

func stepErr(step string, err error) error { return &spawnStepError{Step: step, Err: err} }

// isGuestLoginFault tells whether err is vSphere's InvalidGuestLogin.
func isGuestLoginFault(err error) bool { return fault.Is(err, &types.InvalidGuestLogin{}) }

// waitGuestReady waits for the three readiness stages (docs/design.md#timeouts: guest
// operations, IP — expectedIP when a static one was given — and `env`
// running in the guest) and returns the guest's IP. Each stage has its own
// deadline under ctx.
func (h *HatcheryVSphere) waitGuestReady(ctx context.Context, vm types.ManagedObjectReference, name, expectedIP string, ga guestAccess) (string, error) {
	gctx, cancel := context.WithTimeout(ctx, readiness.GuestOps)
	err := h.vs.WaitForGuestOperationsReady(gctx, vm)
	cancel()
	if err != nil {
		return "", stepErr("wait for guest operations ready", err)
	}
	ictx, cancel := context.WithTimeout(ctx, readiness.IP)
	ip, err := h.vs.WaitForVirtualMachineIP(ictx, vm, expectedIP)
	cancel()
	if err != nil {
		return "", stepErr("wait for ip", err)
	}
	if expectedIP != "" && ip != expectedIP {
		return "", stepErr("wait for ip", fmt.Errorf("guest reports %s, expected %s", ip, expectedIP))
	}
	spawntiming.Mark(ctx, spawntiming.StageIP)
	h.log.Info("vm has ip", logkey.VM, name, logkey.IP, ip)
	if err := h.waitGuestEnv(ctx, vm, ga); err != nil {
		return ip, stepErr("run env in guest", err)
	}
	return ip, nil
}

// waitGuestEnv runs `env` in the guest until it starts, retried on a ticker
// for at most readiness.Env. A refused login fails at once.
func (h *HatcheryVSphere) waitGuestEnv(ctx context.Context, vm types.ManagedObjectReference, ga guestAccess) error {
	ctx, cancel := context.WithTimeout(ctx, readiness.Env)
	defer cancel()
	t := time.NewTicker(readiness.EnvRetry)
	defer t.Stop()
	for {
		_, err := h.vs.StartProgramInGuest(ctx, vm, ga.auth, &types.GuestProgramSpec{ProgramPath: envProgram})
		if err == nil {
			return nil
		}
		if isGuestLoginFault(err) {
			return fmt.Errorf("%w: %w", errGuestLogin, err)
		}
		// A tick and the end of ctx can be ready together, and select picks
		// either: ctx is checked again so that no attempt follows its end.
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
	}
}

// workerScript builds the script the guest runs (docs/architecture.md): the
// preStartScript of the guest credentials entry, then PreCmd, Cmd (with
// " register" for a registration) and PostCmd, rendered as a Go template
// with the worker config. The result may hold the worker token: never log it.
func workerScript(args hatchery.SpawnArguments, preStart string) (string, error) {
	m := args.Model
	cmd := m.GetCmd()
	if args.RegisterOnly {
		cmd += " register"
	}
	var parts []string
	for _, p := range []string{preStart, m.GetPreCmd(), cmd, m.GetPostCmd()} {
		if strings.TrimSpace(p) != "" {
			parts = append(parts, p)
		}
	}
	src := strings.Join(parts, "\n")
	tmpl, err := template.New("worker-script").Option("missingkey=error").Parse(src)
	if err != nil {
		return "", fmt.Errorf("parse worker script of model %q: %w", m.GetName(), err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, args.WorkerConfig); err != nil {
		return "", fmt.Errorf("render worker script of model %q: %w", m.GetName(), err)
	}
	return b.String(), nil
}

// launchWorker starts the worker script in the guest: /bin/echo with
// arguments "-n ;<script>" and CDS_CONFIG in its environment.
func (h *HatcheryVSphere) launchWorker(ctx context.Context, vm types.ManagedObjectReference, ga guestAccess, script string, cfg hatchery.WorkerConfig) error {
	spec := &types.GuestProgramSpec{
		ProgramPath:  launchProgram,
		Arguments:    "-n ;" + script,
		EnvVariables: []string{cdsConfigEnv + "=" + cfg.EncodeBase64()},
	}
	if _, err := h.vs.StartProgramInGuest(ctx, vm, ga.auth, spec); err != nil {
		if isGuestLoginFault(err) {
			return fmt.Errorf("%w: %w", errGuestLogin, err)
		}
		return err
	}
	return nil
}
