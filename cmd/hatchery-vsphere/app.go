package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// StartFunc runs the hatchery until ctx is cancelled (SIGTERM/SIGINT). cfg
// is loaded and validated; logger writes to stderr; reload loads and
// validates the same file again, as `config check` does (a reload:
// SIGHUP, docs/reload.md); setLogLevel sets logger's level from a
// configuration's logLevel ("" is the --log-level flag's), for a reload.
type StartFunc func(ctx context.Context, cfg *config.Config, logger *slog.Logger, reload func() (*config.Config, error), setLogLevel func(string)) error

// DemoFunc runs the in-process demo until ctx is cancelled (or, with
// flags.Once, until its jobs are done); stdout is where it prints the
// addresses of /mon/status and /mon/metrics and the life of every job.
type DemoFunc func(ctx context.Context, stdout io.Writer, logger *slog.Logger, flags DemoFlags) error

// app is the command line with its dependencies injected, so that tests run
// commands as functions (captured output, fake environment, fake hooks)
// without touching process-wide state.
type app struct {
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
	start          StartFunc
	demo           DemoFunc
}

// newApp wires the real process: os streams and environment, and the
// runStart / runDemo hooks.
func newApp() *app {
	return &app{stdout: os.Stdout, stderr: os.Stderr, lookupEnv: os.LookupEnv, start: runStart, demo: runDemo}
}

// usage is printed by help and on a wrong command line.
const usage = `usage: hatchery-vsphere <command> [flags]

commands:
  start [hatchery:vsphere] --config FILE
                              run the hatchery (SIGTERM/SIGINT stop it); FILE may be a CDS
                              engine file as upstream's hatchery reads it (docs/coexistence.md)
  demo [--jobs N] [--once] [--listen ADDR:PORT] [--write-config FILE]
                              run the hatchery against in-process vCenter and CDS simulators
                              (built with -tags demo only: go run -tags demo ./cmd/hatchery-vsphere demo);
                              --write-config FILE: their configuration, for config check --online,
                              vcenter check and start against them
  config new [--rsa-key FILE] [--rsa-key-inline]
                              print the reference configuration (every key, default, meaning;
                              optional features as "#key = …" examples to enable); --rsa-key
                              FILE: the RSA key signing worker tokens, generated (mode 0600)
                              when FILE does not exist, checked when it does; --rsa-key-inline:
                              that key (or a new one) written into the printed file
  config check --config FILE [--online]
                              load and validate FILE; list every problem; with --online also
                              connect to vCenter and resolve the datacenter, resource pool,
                              folder, datastore, network and templates, and check privileges
  vcenter check --config FILE [--json] [--keep] [--clean] [--guest-timeout D] [--latency-model FILE]
                              prove on the configured vCenter, before the first job, every vCenter
                              capability the hatchery relies on (clone into each placement,
                              reconfigure, locks, power, guest, instant clone, change notifications)
                              in a scratch folder it creates and removes; one line each: pass / fail /
                              unsupported and its time (docs/vcenter-check.md)
  ctl [--socket PATH] [--json] COMMAND
                              talk to the running daemon over its unix socket: status, vms,
                              quarantine lift TEMPLATE, hold release VM, drain, reload,
                              placement list | cordon NAME | uncordon NAME
                              (docs/operations.md#ctl)
  version                     print the version, commit, Go and govmomi versions

secrets may come from the environment: CDS_HATCHERY_VSPHERE_PASSWORD,
CDS_HATCHERY_VSPHERE_API_TOKEN, CDS_HATCHERY_VSPHERE_API_TOKENV2,
CDS_HATCHERY_VSPHERE_RSA_PRIVATE_KEY, each also as NAME_FILE (a file path)
or a systemd credential ($CREDENTIALS_DIRECTORY). See docs/configuration.md.
`

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed (bad configuration, start error)
	exitUsage = 2 // wrong command line
)

// run dispatches args (without the program name) and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "start":
		return a.cmdStart(ctx, args[1:])
	case "demo":
		return a.cmdDemo(ctx, args[1:])
	case "config":
		return a.cmdConfig(ctx, args[1:])
	case "ctl":
		return a.cmdCtl(ctx, args[1:])
	case "vcenter":
		return a.cmdVCenter(ctx, args[1:])
	case "version":
		return a.cmdVersion(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(a.stderr, "hatchery-vsphere: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// logger is the process logger: text lines on stderr.
func (a *app) logger(level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
}

// parseLevel reads --log-level.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// loadOptions is how commands load configuration: secrets from a.lookupEnv.
func (a *app) loadOptions() config.LoadOptions {
	return config.LoadOptions{LookupEnv: a.lookupEnv}
}
