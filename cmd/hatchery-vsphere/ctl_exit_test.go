package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
)

// TestCtlExitCodes: against a ctl socket, an unknown command and
// arguments a command does not take are a wrong command line (exit 2, as
// docs/operations.md says), a refusal exits 1, an answer 0. ctl bogus
// exited 1 before.
func TestCtlExitCodes(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ctl") // short: a socket path has 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "ctl.sock")
	s, err := ctl.Listen(sock, ctl.Options{Logger: slog.New(slog.DiscardHandler), Commands: map[string]ctl.Command{
		"hold": {Action: true, Run: func(_ context.Context, _ ctl.Peer, args []string) (ctl.Result, error) {
			switch {
			case len(args) != 2 || args[0] != "release":
				return ctl.Result{}, fmt.Errorf("%w: hold release VM", ctl.ErrUsage)
			case args[1] != "held-vm":
				return ctl.Result{}, errors.New("not held")
			}
			return ctl.Result{Text: "released\n"}, nil
		}},
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bogus"}, exitUsage, `ctl bogus: unknown command "bogus"`},
		{[]string{"hold", "free", "x"}, exitUsage, "ctl hold: usage: hold release VM"},
		{[]string{"hold", "release", "other-vm"}, exitFail, "ctl hold: not held"},
		{[]string{"hold", "release", "held-vm"}, exitOK, ""},
	} {
		r := runCmd(t, nil, nil, append([]string{"ctl", "--socket", sock}, tt.args...)...)
		assert.Equal(t, tt.code, r.code, "%v: %s", tt.args, r.stderr)
		if tt.want != "" {
			assert.Contains(t, r.stderr, tt.want, tt.args)
		}
	}
}

// TestHelpListsEveryCtlCommand: the --help list names each command of
// ctl's own usage, placement's included (it was missing).
func TestHelpListsEveryCtlCommand(t *testing.T) {
	t.Parallel()
	r := runCmd(t, nil, nil, "--help")
	require.Equal(t, exitOK, r.code)
	for _, c := range []string{"status", "vms", "quarantine lift TEMPLATE", "hold release VM", "drain", "reload", "placement list", "cordon NAME", "uncordon NAME"} {
		assert.Contains(t, r.stdout, c)
	}
}

// TestConfigHelp: `config --help` (and help, -h) prints the config
// usage on stdout and exits 0; it was refused as an unknown subcommand.
func TestConfigHelp(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"--help", "-h", "help"} {
		r := runCmd(t, nil, nil, "config", h)
		assert.Equal(t, exitOK, r.code, "%s: %s", h, r.stderr)
		assert.Contains(t, r.stdout, "config check --config FILE", h)
		assert.NotContains(t, r.stderr, "unknown subcommand", h)
	}
}
