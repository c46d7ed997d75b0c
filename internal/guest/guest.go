package guest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Timeouts bounds each readiness stage of a new worker VM
// (docs/design.md#timeouts). Tests shorten them; production code only
// reads them.
type Timeouts struct {
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

// Readiness are the timeouts in use.
var Readiness = Timeouts{
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
	// EnvProgram checks that guest operations really run processes.
	EnvProgram = "/usr/bin/env"
	// LaunchProgram is the program the worker script is run through: the
	// guest's shell runs "/bin/echo -n ;<script>" (docs/architecture.md).
	LaunchProgram = "/bin/echo"
	// cdsConfigEnv is the environment variable holding the worker config.
	cdsConfigEnv = "CDS_CONFIG"
)

// ErrLogin marks a spawn failure caused by the guest refusing the
// credentials (InvalidGuestLogin): retrying does not help.
var ErrLogin = errors.New("guest refused the credentials")

// StepError is a failure of one step of a spawn.
type StepError struct {
	// Step names the step, as the spawn's failure reports it.
	Step string
	// Err is the step's error.
	Err error
}

// Error is "step: err".
func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// StepErr returns err as the failure of step.
func StepErr(step string, err error) error { return &StepError{Step: step, Err: err} }

// Port is what a Starter needs of vCenter: the guest's readiness and
// program starts, in the project's vocabulary. vctypes.Port (the adapter,
// *vcenter.Client, and the mock) implements it.
type Port interface {
	IPWaiter
	// WaitForGuestOperationsReady blocks until the guest runs programs.
	WaitForGuestOperationsReady(ctx context.Context, vm vctypes.Ref) error
	// StartProgramInGuest runs prog in the guest with auth and returns
	// its pid; a refused account is a vctypes.FaultInvalidGuestLogin.
	StartProgramInGuest(ctx context.Context, vm vctypes.Ref, auth *vctypes.GuestAuth, prog vctypes.GuestProgram) (int64, error)
}

// IPWaiter is what WaitIP needs of vCenter.
type IPWaiter interface {
	// WaitForVirtualMachineIP blocks until the guest reports an IPv4
	// address (expectedIP when not empty).
	WaitForVirtualMachineIP(ctx context.Context, vm vctypes.Ref, expectedIP string) (string, error)
}

// WaitIP waits at most timeout for the guest of vm to report its IPv4
// address and returns it. With an expectedIP (a static one), an address
// other than it is an error: the VM is not the one its record describes.
func WaitIP(ctx context.Context, port IPWaiter, vm vctypes.Ref, expectedIP string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ip, err := port.WaitForVirtualMachineIP(ctx, vm, expectedIP)
	if err != nil {
		return "", err
	}
	if expectedIP != "" && ip != expectedIP {
		return "", fmt.Errorf("guest reports %s, expected %s", ip, expectedIP)
	}
	return ip, nil
}

// Starter waits for a worker VM's guest and starts the worker in it. It
// holds nothing else: a value is made per use.
type Starter struct {
	// Port waits for the guest and starts programs in it.
	Port Port
	// Log receives one line per readiness stage reached.
	Log *slog.Logger
	// Windows makes the probe and the launch PowerShell's (windows.go).
	Windows bool
	// Timeouts replaces Readiness when set (a Windows guest's bounds,
	// windowsGuestOpsTimeout and the others).
	Timeouts *Timeouts
}

// timeouts are the bounds in use: Timeouts, else Readiness.
func (s Starter) timeouts() Timeouts {
	if s.Timeouts != nil {
		return *s.Timeouts
	}
	return Readiness
}

// probe is the program WaitEnv starts.
func (s Starter) probe() vctypes.GuestProgram {
	if s.Windows {
		return vctypes.GuestProgram{Path: PowerShellProgram, Args: PowerShellProbeArgs}
	}
	return vctypes.GuestProgram{Path: EnvProgram}
}

// isGuestLoginFault tells whether err is vSphere's InvalidGuestLogin (its
// kind, attached where the error left the port: vcenter.Classify).
func isGuestLoginFault(err error) bool { return errors.Is(err, vctypes.FaultInvalidGuestLogin) }

// WaitReady waits for the three readiness stages (docs/design.md#timeouts: guest
// operations, IP — expectedIP when a static one was given — and `env`
// running in the guest) and returns the guest's IP. Each stage has its own
// deadline under ctx.
func (s Starter) WaitReady(ctx context.Context, vm vctypes.Ref, name, expectedIP string, ga Access) (string, error) {
	to := s.timeouts()
	gctx, cancel := context.WithTimeout(ctx, to.GuestOps)
	err := s.Port.WaitForGuestOperationsReady(gctx, vm)
	cancel()
	if err != nil {
		return "", StepErr("wait for guest operations ready", err)
	}
	ip, err := WaitIP(ctx, s.Port, vm, expectedIP, to.IP)
	if err != nil {
		return "", StepErr("wait for ip", err)
	}
	spawntiming.Mark(ctx, spawntiming.StageIP)
	s.Log.Info("vm has ip", logkey.VM, name, logkey.IP, ip)
	if err := s.WaitEnv(ctx, vm, ga); err != nil {
		return ip, StepErr("run env in guest", err)
	}
	return ip, nil
}

// WaitEnv runs `env` in the guest (PowerShell in a Windows one) until it
// starts, retried on a ticker for at most the Env bound. A refused login
// fails at once.
func (s Starter) WaitEnv(ctx context.Context, vm vctypes.Ref, ga Access) error {
	to := s.timeouts()
	ctx, cancel := context.WithTimeout(ctx, to.Env)
	defer cancel()
	t := time.NewTicker(to.EnvRetry)
	defer t.Stop()
	for {
		_, err := s.Port.StartProgramInGuest(ctx, vm, ga.Auth, s.probe())
		if err == nil {
			return nil
		}
		if isGuestLoginFault(err) {
			return fmt.Errorf("%w: %w", ErrLogin, err)
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

// Script builds the script the guest runs (docs/architecture.md): the
// preStartScript of the guest credentials entry, then PreCmd, Cmd (with
// " register" for a registration) and PostCmd, rendered as one Go template
// with spawn.ModelTemplateData (the names CDS's own hatcheries give
// models, {{.API}} and the others, and the worker config's;
// docs/configuration.md, "Model command templates"). workerTTL gives
// {{.TTL}}. A command that does not render is an error wrapping a
// *spawn.ModelCommandError. The result may hold the worker token: never
// log it.
func Script(args spawn.Arguments, preStart string, workerTTL time.Duration) (string, error) {
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
	data := spawn.NewModelTemplateData(args.WorkerConfig, m, int(workerTTL/time.Minute))
	s, err := spawn.RenderModelCommand(strings.Join(parts, "\n"), data)
	if err != nil {
		return "", fmt.Errorf("worker script of model %q: %w", m.GetName(), err)
	}
	return s, nil
}

// Launch starts the worker script in the guest: /bin/echo with
// arguments "-n ;<script>" and CDS_CONFIG in its environment; in a
// Windows guest PowerShell with the constant PowerShellLaunchArgs, the
// script (wrapped by WindowsScript) and CDS_CONFIG both in its
// environment, nothing of the worker on its command line.
func (s Starter) Launch(ctx context.Context, vm vctypes.Ref, ga Access, script string, cfg spawn.WorkerConfig) error {
	spec := vctypes.GuestProgram{
		Path: LaunchProgram,
		Args: "-n ;" + script,
		Env:  []string{cdsConfigEnv + "=" + cfg.EncodeBase64()},
	}
	if s.Windows {
		spec = vctypes.GuestProgram{
			Path: PowerShellProgram,
			Args: PowerShellLaunchArgs,
			Env:  []string{cdsConfigEnv + "=" + cfg.EncodeBase64(), ScriptEnv + "=" + EncodeScript(WindowsScript(script))},
		}
	}
	if _, err := s.Port.StartProgramInGuest(ctx, vm, ga.Auth, spec); err != nil {
		if isGuestLoginFault(err) {
			return fmt.Errorf("%w: %w", ErrLogin, err)
		}
		return err
	}
	return nil
}
