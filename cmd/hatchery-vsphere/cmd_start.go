package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
)

// runStart is the hook `start` calls with a loaded, validated configuration.
// WIRING: replace its body with the daemon (build the govmomi client, the
// CDS client and vsphere.New, then run the framework loop until ctx is
// done). Keep the signature; ctx is cancelled on SIGTERM/SIGINT.
var runStart StartFunc = func(ctx context.Context, cfg *vsphere.Configuration, logger *slog.Logger) error {
	logger.Warn("start not wired yet", "hatchery", cfg.CommonConfiguration.Name)
	return nil
}

// runDemo is the hook `demo` calls. WIRING: replace its body with the
// in-process demo (vcsim + CDS simulator + the hatchery loaded from
// vsphere.DemoConfig()); ctx is cancelled on SIGTERM/SIGINT.
var runDemo DemoFunc = func(ctx context.Context, stdout io.Writer, logger *slog.Logger) error {
	logger.Warn("demo not wired yet")
	return nil
}

// cmdStart is `start --config FILE [--log-level LEVEL]`: load and validate,
// log the redacted configuration at debug level, then run the start hook.
func (a *app) cmdStart(ctx context.Context, args []string) int {
	fs := a.flagSet("start")
	path := fs.String("config", "", "configuration file (required)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	if *path == "" {
		fmt.Fprint(a.stderr, "start: --config FILE is required\n")
		return exitUsage
	}
	lvl, err := parseLevel(*level)
	if err != nil {
		fmt.Fprintf(a.stderr, "start: %v\n", err)
		return exitUsage
	}
	cfg, err := vsphere.LoadAndValidate(*path, a.loadOptions())
	if err != nil {
		printConfigError(a.stderr, *path, err)
		return exitFail
	}
	logger := a.logger(lvl)
	logger.Info("configuration loaded", "config", *path, "hatchery", cfg.CommonConfiguration.Name, "endpoint", cfg.Endpoint, "version", version)
	logger.Debug("configuration", "config", cfg.Redacted())
	if err := a.start(ctx, cfg, logger); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("hatchery stopped", "reason", err)
		return exitFail
	}
	return exitOK
}

// cmdDemo is `demo [--log-level LEVEL]`.
func (a *app) cmdDemo(ctx context.Context, args []string) int {
	fs := a.flagSet("demo")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	lvl, err := parseLevel(*level)
	if err != nil {
		fmt.Fprintf(a.stderr, "demo: %v\n", err)
		return exitUsage
	}
	logger := a.logger(lvl)
	if err := a.demo(ctx, a.stdout, logger); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("demo stopped", "reason", err)
		return exitFail
	}
	return exitOK
}
