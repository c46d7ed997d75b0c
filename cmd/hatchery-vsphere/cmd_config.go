package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/config/upstream"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// configUsage is printed by `config --help` and on a wrong `config`
// command line.
const configUsage = `usage: hatchery-vsphere config new [--rsa-key FILE] [--rsa-key-inline] | config check --config FILE [--online]

  config new                  print the reference configuration
      --rsa-key FILE          also generate the worker-token RSA key into FILE (mode 0600; an existing file is checked)
      --rsa-key-inline        write a generated RSA key into the printed configuration
  config check --config FILE  load and validate FILE; list every problem
      --online                also connect to vCenter and check the topology
`

// cmdConfig is `config new [--rsa-key FILE] [--rsa-key-inline]` and `config check --config FILE [--online]`.
func (a *app) cmdConfig(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, configUsage)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.stdout, configUsage)
		return exitOK
	case "new":
		return a.cmdConfigNew(args[1:])
	case "check":
		fs := a.flagSet("config check")
		path := fs.String("config", "", "configuration file to check (required)")
		online := fs.Bool("online", false, "also connect to vCenter and check the topology: datacenter, resource pool, folder, datastore, network, placements, templates, privileges")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			return exitUsage
		}
		if *path == "" {
			fmt.Fprint(a.stderr, "config check: --config FILE is required\n")
			return exitUsage
		}
		cfg, err := config.LoadAndValidate(*path, a.loadOptions())
		if err != nil {
			printConfigError(a.stderr, *path, err)
			return exitFail
		}
		if *online {
			if code := a.checkOnline(ctx, *path, cfg); code != exitOK {
				return code
			}
		}
		fmt.Fprintln(a.stdout, "configuration OK")
		for _, n := range cfg.BootstrapNotes() {
			fmt.Fprintln(a.stdout, "  "+n)
		}
		printUpstream(a.stdout, cfg.Upstream())
		return exitOK
	default:
		fmt.Fprintf(a.stderr, "config: unknown subcommand %q (want new or check)\n", args[0])
		return exitUsage
	}
}

// onlineCheckTimeout bounds `config check --online` as a whole: a
// connection and a few lookups, each request bounded by the client's own
// request timeout (15 s); two minutes is far past a healthy vCenter and
// still ends a check against one that hangs.
const onlineCheckTimeout = 2 * time.Minute

// logoutTimeout bounds the check's logout: one request.
const logoutTimeout = 5 * time.Second

// checkOnline connects to vCenter with cfg and checks its topology
// (vsphere.CheckTopology): every problem on its own line with its key,
// the notes on what vCenter could not say, and exitFail on a problem or
// when vCenter cannot be asked. Its messages never hold a secret (the
// vcenter package's errors never do).
func (a *app) checkOnline(ctx context.Context, path string, cfg *config.Config) int {
	ctx, cancel := context.WithTimeout(ctx, onlineCheckTimeout)
	defer cancel()
	vcCfg := daemon.VCenterConfig(cfg)
	// The problems are printed below; the client's own log lines would
	// repeat them.
	vcCfg.Logger = slog.New(slog.DiscardHandler)
	vc, err := vcenter.Dial(ctx, vcCfg)
	if err != nil {
		var dnf *vcenter.DatacenterNotFoundError
		if errors.As(err, &dnf) {
			printConfigError(a.stderr, path, config.Errors{{Key: config.KeyPrefix + ".datacenterString", Problem: err.Error()}})
			return exitFail
		}
		fmt.Fprintf(a.stderr, "%s: online check: %v\n", path, err)
		return exitFail
	}
	defer func() {
		lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
		defer lcancel()
		vc.Close(lctx)
	}()
	problems, rep, err := vsphere.CheckTopology(ctx, vc, cfg)
	for _, n := range rep.Notes {
		fmt.Fprintln(a.stderr, "note: "+n)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: online check: %v\n", path, err)
		return exitFail
	}
	if len(problems) > 0 {
		printConfigError(a.stderr, path, problems)
		return exitFail
	}
	fmt.Fprintf(a.stdout, "vcenter topology OK: %s\n", resolvedSummary(rep))
	return exitOK
}

// resolvedSummary is one line naming what the check resolved.
func resolvedSummary(rep vcenter.TopologyReport) string {
	var parts []string
	for _, k := range []string{"resourcePoolString", "folderString", "datastoreString", "networkString"} {
		if p, ok := rep.Resolved[k]; ok {
			parts = append(parts, k+" "+p)
		}
	}
	templates, placements := 0, 0
	for k := range rep.Resolved {
		switch {
		case strings.HasSuffix(k, ".modelVMWare"):
			templates++
		case strings.HasPrefix(k, "placements[") && strings.HasSuffix(k, ".resourcePool"):
			placements++
		}
	}
	if placements > 0 {
		parts = append(parts, fmt.Sprintf("%d placement(s)", placements))
	}
	parts = append(parts, fmt.Sprintf("%d template key(s)", templates))
	if len(rep.Notes) == 0 {
		parts = append(parts, "privileges granted")
	}
	return strings.Join(parts, ", ")
}

// maxPrintedProblems bounds the problems printed: a corrupted or wrong file
// can hold thousands, and the first ones tell what is wrong.
const maxPrintedProblems = 100

// printConfigError writes a load/validation failure: every problem on its
// own line, or the single fatal error. Messages never hold secrets (the
// vsphere package guarantees and tests it).
func printConfigError(w io.Writer, path string, err error) {
	var ce config.Errors
	if errors.As(err, &ce) {
		fmt.Fprintf(w, "%s: %d configuration problem(s):\n", path, len(ce))
		for i, e := range ce {
			if i == maxPrintedProblems {
				fmt.Fprintf(w, "  … and %d more (fix these first; a file with this many problems is probably not a hatchery configuration)\n", len(ce)-i)
				break
			}
			fmt.Fprintf(w, "  %s\n", e.Error())
		}
		return
	}
	fmt.Fprintf(w, "%v\n", err)
}

// flagSet is a flag set writing its errors and usage to stderr.
func (a *app) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	return fs
}

// printUpstream writes, for a CDS engine file, what this hatchery does with
// it: the ignored sections, the placeholders and zeros, then every upstream
// key the file sets (docs/coexistence.md).
func printUpstream(w io.Writer, rep *upstream.Report) {
	if !rep.Engine && len(rep.Notes) == 0 {
		return
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w, "upstream CDS engine file: what differs")
		for _, n := range rep.Notes {
			fmt.Fprintln(w, "  "+n.String())
		}
	}
	if rep.Engine {
		fmt.Fprintln(w, "upstream keys of [hatchery.vsphere]: what this hatchery does with each")
		for _, n := range rep.Keys {
			fmt.Fprintln(w, "  "+n.String())
		}
	}
}
