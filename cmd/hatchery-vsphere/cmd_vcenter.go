package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcheck"
)

// vcenterUsage is printed by `vcenter --help` and on a wrong `vcenter`
// command line.
const vcenterUsage = `usage: hatchery-vsphere vcenter check --config FILE [--json] [--keep] [--clean] [--guest-timeout D] [--latency-model FILE]

  vcenter check --config FILE  prove, on the configured vCenter and before the first job, every vCenter
                               capability the hatchery relies on, in a scratch folder of its own that it
                               creates and removes: one line per capability and object, pass / fail /
                               unsupported, its time; a failure names the fault and what to change
                               (docs/vcenter-check.md); exit 0 only when nothing failed
      --json                   print the report as JSON (for bug reports)
      --keep                   leave the scratch folder and its VMs (powered off) for inspection
      --clean                  only remove what earlier runs left (their record proves them the check's)
      --guest-timeout D        how long a clone's guest may take to be ready (default 5m)
      --latency-model FILE     write the measured operation times in the latency model's form, for
                               make bench-latency LATENCY_MODEL=FILE (docs/vcenter-check.md#latency-model)
`

// vcenterCheckTimeout bounds a whole `vcenter check`: clones, power
// cycles and guest readiness of every template on every placement, each
// step bounded by its own timeout; an hour ends a run against a vCenter
// that hangs.
const vcenterCheckTimeout = time.Hour

// cmdVCenter is `vcenter check`.
func (a *app) cmdVCenter(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, vcenterUsage)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.stdout, vcenterUsage)
		return exitOK
	case "check":
	default:
		fmt.Fprintf(a.stderr, "vcenter: unknown subcommand %q (want check)\n", args[0])
		return exitUsage
	}
	fs := a.flagSet("vcenter check")
	path := fs.String("config", "", "configuration file (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	keep := fs.Bool("keep", false, "leave the scratch folder and its VMs for inspection")
	clean := fs.Bool("clean", false, "only remove what earlier runs left")
	latency := fs.String("latency-model", "", "write the measured operation times to this file in the latency model's form")
	guestTimeout := fs.Duration("guest-timeout", vcheck.DefaultGuestReadyTimeout, "how long a clone's guest may take to be ready")
	if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	if *path == "" {
		fmt.Fprint(a.stderr, "vcenter check: --config FILE is required\n")
		return exitUsage
	}
	cfg, err := config.LoadAndValidate(*path, a.loadOptions())
	if err != nil {
		printConfigError(a.stderr, *path, err)
		return exitFail
	}
	ctx, cancel := context.WithTimeout(ctx, vcenterCheckTimeout)
	defer cancel()
	rep := vcheck.Run(ctx, cfg, dialer(cfg), vcheck.Options{Keep: *keep, CleanOnly: *clean, GuestReadyTimeout: *guestTimeout, LatencyModel: *latency})
	if *asJSON {
		if err := rep.WriteJSON(a.stdout); err != nil {
			fmt.Fprintf(a.stderr, "vcenter check: %v\n", err)
			return exitFail
		}
	} else {
		rep.WriteText(a.stdout)
	}
	if rep.Failed() {
		return exitFail
	}
	return exitOK
}

// dialer connects to cfg's vCenter as `config check --online` does
// (daemon.VCenterConfig), its own log lines discarded: the check's report
// says what failed.
func dialer(cfg *config.Config) vcheck.Dialer {
	return func(ctx context.Context) (*vcenter.Client, error) {
		vcCfg := daemon.VCenterConfig(cfg)
		vcCfg.Logger = slog.New(slog.DiscardHandler)
		return vcenter.Dial(ctx, vcCfg)
	}
}
