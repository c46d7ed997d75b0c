package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/daemon"
	"github.com/cds-contrib/hatchery-vsphere/internal/sdnotify"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// runStart is the hook `start` calls with a loaded, validated configuration:
// the daemon, until ctx is cancelled (SIGTERM/SIGINT); each SIGHUP
// (`systemctl reload`) reloads the configuration (daemon.Options.Reload).
// Started by systemd with Type=notify, it tells systemd its state and
// feeds the watchdog ($NOTIFY_SOCKET, $WATCHDOG_USEC; docs/install.md).
var runStart StartFunc = func(ctx context.Context, cfg *config.Config, logger *slog.Logger, reload func() (*config.Config, error), setLogLevel func(string)) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wd, err := sdnotify.WatchdogInterval(os.LookupEnv, os.Getpid())
	if err != nil {
		logger.Error("systemd watchdog not fed", logkey.Err, err)
	}
	return daemon.Run(ctx, daemon.Options{Config: cfg, Logger: logger, Version: version, LoadConfig: reload, Reload: hup, SetLogLevel: setLogLevel,
		Notify: sdnotify.FromEnv(os.LookupEnv), WatchdogInterval: wd})
}

// upstreamService is the argument operators' units give upstream's engine
// (`engine start hatchery:vsphere --config FILE`): accepted before or
// after the flags, so that only the binary changes.
const upstreamService = "hatchery:vsphere"

// serviceArg drops upstream's service argument from the head of args;
// another service name is refused (false) with a line saying why.
func (a *app) serviceArg(args []string) ([]string, bool) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return args, true
	}
	if args[0] == upstreamService {
		return args[1:], true
	}
	if strings.Contains(args[0], ":") || slices.Contains([]string{"api", "cdn", "ui", "hooks", "repositories", "elasticsearch", "migrate", "vcs"}, args[0]) {
		fmt.Fprintf(a.stderr, "start: this binary runs only %s (upstream's service name), not %q\n", upstreamService, args[0])
		return nil, false
	}
	return args, true
}

// cmdStart is `start [hatchery:vsphere] --config FILE [--log-level LEVEL]`: load and validate,
// log the redacted configuration at debug level, then run the start hook.
func (a *app) cmdStart(ctx context.Context, args []string) int {
	fs := a.flagSet("start")
	path := fs.String("config", "", "configuration file (required)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	args, ok := a.serviceArg(args)
	if !ok {
		return exitUsage
	}
	if fs.Parse(args) != nil {
		return exitUsage
	}
	if rest, ok := a.serviceArg(fs.Args()); !ok || len(rest) > 0 {
		if ok {
			fmt.Fprintf(a.stderr, "start: unexpected argument %q\n", rest[0])
		}
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
	cfg, err := config.LoadAndValidate(*path, a.loadOptions())
	if err != nil {
		printConfigError(a.stderr, *path, err)
		return exitFail
	}
	if ctx.Err() != nil {
		// SIGTERM/SIGINT arrived while the file was read: stop, start nothing.
		return exitOK
	}
	// The level: the configuration's logLevel when set, else the flag's;
	// a reload sets it again (setLogLevel).
	levelVar := new(slog.LevelVar)
	setLogLevel := func(s string) {
		if l, err := config.ParseLogLevel(s); err == nil {
			levelVar.Set(l)
			return
		}
		levelVar.Set(lvl) // "" (validated before): the flag's
	}
	setLogLevel(cfg.LogLevel)
	logger := a.logger(levelVar)
	logger.Info("configuration loaded", "config", *path, "hatchery", cfg.CommonConfiguration.Name, "endpoint", cfg.Endpoint, "version", version)
	// A CDS engine file: what is done with upstream's forms, one line each
	// (docs/coexistence.md).
	for _, n := range cfg.Upstream().Notes {
		logger.Info("upstream configuration", "key", n.Key, logkey.Detail, n.What)
	}
	logger.Debug("configuration", "config", cfg.Redacted())
	reload := func() (*config.Config, error) { return config.LoadAndValidate(*path, a.loadOptions()) }
	if err := a.start(ctx, cfg, logger, reload, setLogLevel); err != nil && !errors.Is(err, context.Canceled) {
		logger.Error("hatchery stopped", logkey.Err, err)
		return exitFail
	}
	return exitOK
}
