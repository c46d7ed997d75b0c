package guest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// recordingPort is a Port that answers at once and records the programs
// started and the deadline of each wait.
type recordingPort struct {
	mu        sync.Mutex
	programs  []vctypes.GuestProgram
	deadlines map[string]time.Duration
}

func (p *recordingPort) bound(ctx context.Context, what string) {
	d, _ := ctx.Deadline()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deadlines == nil {
		p.deadlines = map[string]time.Duration{}
	}
	if _, ok := p.deadlines[what]; !ok {
		p.deadlines[what] = time.Until(d)
	}
}

func (p *recordingPort) WaitForVirtualMachineIP(ctx context.Context, _ vctypes.Ref, _ string) (string, error) {
	p.bound(ctx, "ip")
	return "10.0.0.7", nil
}

func (p *recordingPort) WaitForGuestOperationsReady(ctx context.Context, _ vctypes.Ref) error {
	p.bound(ctx, "guestops")
	return nil
}

func (p *recordingPort) StartProgramInGuest(ctx context.Context, _ vctypes.Ref, _ *vctypes.GuestAuth, prog vctypes.GuestProgram) (int64, error) {
	p.bound(ctx, "program")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.programs = append(p.programs, prog)
	return int64(len(p.programs)), nil
}

// TestWindowsStarter: a Windows starter waits with its own bounds, probes
// with PowerShell and launches PowerShell with a command line that is the
// same for every worker (no token, no command of the model), the worker
// config and the wrapped script in the environment; the script ends by
// powering the VM off whatever the commands did.
func TestWindowsStarter(t *testing.T) {
	t.Parallel()
	port := &recordingPort{}
	to := Readiness
	to.GuestOps, to.IP, to.Env = 41*time.Minute, 42*time.Minute, 43*time.Minute
	s := Starter{Port: port, Log: slog.New(slog.DiscardHandler), Windows: true, Timeouts: &to}
	vm := vctypes.Ref{Type: "VirtualMachine", Value: "vm-1"}
	ga := Access{Auth: &vctypes.GuestAuth{Username: "Administrator", Password: "guest-pw"}}
	ip, err := s.WaitReady(context.Background(), vm, "w", "", ga)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7", ip)
	assert.InDelta(t, float64(41*time.Minute), float64(port.deadlines["guestops"]), float64(time.Minute), "windowsGuestOpsTimeout bounds the wait")
	assert.InDelta(t, float64(42*time.Minute), float64(port.deadlines["ip"]), float64(time.Minute), "windowsIPTimeout bounds the wait")
	assert.InDelta(t, float64(43*time.Minute), float64(port.deadlines["program"]), float64(time.Minute), "windowsEnvTimeout bounds the probe")
	require.Len(t, port.programs, 1)
	assert.Equal(t, vctypes.GuestProgram{Path: PowerShellProgram, Args: PowerShellProbeArgs}, port.programs[0], "the probe is PowerShell, not /usr/bin/env")

	cfg := scriptWorkerConfig()
	script := "Set-Location $env:TEMP\n& .\\worker.exe --token " + cfg.APIToken
	require.NoError(t, s.Launch(context.Background(), vm, ga, script, cfg))
	require.Len(t, port.programs, 2)
	launch := port.programs[1]
	assert.Equal(t, PowerShellProgram, launch.Path)
	assert.Equal(t, PowerShellLaunchArgs, launch.Args, "the command line is constant")
	for _, secret := range []string{cfg.APIToken, cfg.EncodeBase64(), "guest-pw", "worker.exe"} {
		assert.NotContains(t, launch.Path+" "+launch.Args, secret)
	}
	env := map[string]string{}
	for _, kv := range launch.Env {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok)
		env[k] = v
	}
	got, err := spawn.DecodeWorkerConfig(env["CDS_CONFIG"])
	require.NoError(t, err)
	assert.Equal(t, cfg, got)
	decoded, err := DecodeScript(env[ScriptEnv])
	require.NoError(t, err)
	assert.Equal(t, WindowsScript(script), decoded)
	assert.Contains(t, decoded, script+"\n} finally {\n  Stop-Computer -Force\n}\n")
	assert.True(t, strings.HasPrefix(decoded, "$ErrorActionPreference = 'Stop'\n"))
}

// TestLinuxStarterUnchanged: without Windows the probe is env and the
// launch /bin/echo, bounded by Readiness.
func TestLinuxStarterUnchanged(t *testing.T) {
	t.Parallel()
	port := &recordingPort{}
	s := Starter{Port: port, Log: slog.New(slog.DiscardHandler)}
	vm := vctypes.Ref{Type: "VirtualMachine", Value: "vm-1"}
	_, err := s.WaitReady(context.Background(), vm, "w", "", Access{})
	require.NoError(t, err)
	assert.InDelta(t, float64(Readiness.GuestOps), float64(port.deadlines["guestops"]), float64(time.Minute))
	require.NoError(t, s.Launch(context.Background(), vm, Access{}, "./worker", scriptWorkerConfig()))
	require.Len(t, port.programs, 2)
	assert.Equal(t, EnvProgram, port.programs[0].Path)
	assert.Equal(t, LaunchProgram, port.programs[1].Path)
	assert.Equal(t, "-n ;./worker", port.programs[1].Args)
}
