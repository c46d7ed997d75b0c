package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// cmdConfig is `config new` and `config check --config FILE`.
func (a *app) cmdConfig(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, "usage: hatchery-vsphere config new | config check --config FILE\n")
		return exitUsage
	}
	switch args[0] {
	case "new":
		fs := a.flagSet("config new")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			return exitUsage
		}
		if _, err := a.stdout.Write(config.ReferenceConfig()); err != nil {
			fmt.Fprintf(a.stderr, "config new: %v\n", err)
			return exitFail
		}
		return exitOK
	case "check":
		fs := a.flagSet("config check")
		path := fs.String("config", "", "configuration file to check (required)")
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
		fmt.Fprintln(a.stdout, "configuration OK")
		for _, n := range cfg.BootstrapNotes() {
			fmt.Fprintln(a.stdout, "  "+n)
		}
		return exitOK
	default:
		fmt.Fprintf(a.stderr, "config: unknown subcommand %q (want new or check)\n", args[0])
		return exitUsage
	}
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
