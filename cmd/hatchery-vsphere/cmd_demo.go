package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// DemoFlags are the command line of `demo`.
type DemoFlags struct {
	// Jobs is --jobs: how many jobs to feed (0: a steady trickle, forever).
	Jobs int
	// Once is --once: exit 0 once the jobs are done and their VMs cleaned up.
	Once bool
	// Listen is --listen: the /mon address of the first instance ("" picks
	// a free port).
	Listen string
	// Instances is --instances: how many daemons of the one hatchery name
	// run against the simulators (1 or 2).
	Instances int
	// Soak is --soak: feed jobs for that long, then end as --once does,
	// with the soak's figures and growth check (`make soak`).
	Soak time.Duration
	// WriteConfig is --write-config: a file the configuration of the
	// demo's simulators is written to (vCenter and CDS API, throwaway
	// credentials), for `config check --online`, `vcenter check` and
	// `start` against them.
	WriteConfig string
}

// maxDemoInstances is the most instances --instances accepts (the demo's
// checks are written for two). It is demo.MaxInstances written again: this
// file is in the production build, which must not link internal/demo
// (builddeps_test.go), and the flag is refused as usage before the demo
// hook, in either build.
const maxDemoInstances = 2

// demoBuildHint is what `demo` says in a binary built without the demo.
const demoBuildHint = "demo: this binary was built without the demo (it links no simulator); run it with:\n" +
	"  go run -tags demo ./cmd/hatchery-vsphere demo\n"

// cmdDemo is `demo [--jobs N] [--once] [--soak D] [--instances N] [--listen ADDR:PORT] [--log-level LEVEL]`.
// The hatchery's own logs go to stderr at --log-level (warn by default, so
// that the job lines on stdout stay readable).
func (a *app) cmdDemo(ctx context.Context, args []string) int {
	fs := a.flagSet("demo")
	var f DemoFlags
	fs.IntVar(&f.Jobs, "jobs", 0, "number of jobs to feed (0: a steady trickle until interrupted)")
	fs.BoolVar(&f.Once, "once", false, "exit 0 when the jobs are done and their VMs destroyed (needs --jobs), non-zero on timeout")
	fs.StringVar(&f.Listen, "listen", "", "address of /mon (default 127.0.0.1 on a free port; with --instances 2, the first instance's)")
	fs.IntVar(&f.Instances, "instances", 1, "daemons of one hatchery name against the same simulators: 1 or 2")
	fs.DurationVar(&f.Soak, "soak", 0, "soak: feed jobs for this long (e.g. 20m), then end as --once does; prints the heap, goroutines and open files, fails on growth that does not level off or on a WARN")
	fs.StringVar(&f.WriteConfig, "write-config", "", "write the configuration of the running demo's simulators to this file (mode 0600), for config check --online, vcenter check and start")
	level := fs.String("log-level", "warn", "hatchery logs on stderr: debug, info, warn or error")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	if f.Jobs < 0 || (f.Once && f.Jobs == 0) {
		fmt.Fprint(a.stderr, "demo: --once needs --jobs N with N > 0\n")
		return exitUsage
	}
	if f.Soak < 0 || (f.Soak > 0 && (f.Jobs > 0 || f.Once)) {
		fmt.Fprint(a.stderr, "demo: --soak D takes a positive duration and neither --jobs nor --once (it ends on its own)\n")
		return exitUsage
	}
	if f.Instances < 1 || f.Instances > maxDemoInstances {
		fmt.Fprintf(a.stderr, "demo: --instances %d: 1 or %d instances are supported\n", f.Instances, maxDemoInstances)
		return exitUsage
	}
	lvl, err := parseLevel(*level)
	if err != nil {
		fmt.Fprintf(a.stderr, "demo: %v\n", err)
		return exitUsage
	}
	if a.demo == nil {
		fmt.Fprint(a.stderr, demoBuildHint)
		return exitUsage
	}
	logger := a.logger(lvl)
	if err := a.demo(ctx, a.stdout, logger, f); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("demo stopped", logkey.Err, err)
		return exitFail
	}
	return exitOK
}
