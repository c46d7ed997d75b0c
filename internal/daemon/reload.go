package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// ReloadFunc reloads the configuration of a running daemon (SIGHUP,
// `systemctl reload`, `hatchery-vsphere ctl reload`): it reads the file
// again with the checks of `config check`, applies the keys that may
// change live (config.LiveKey) or, when any other key changed, refuses
// the whole file. summary says what changed or what was refused; err is
// set when nothing was applied (a broken file, a refused key). The
// running configuration is replaced entirely or not at all.
type ReloadFunc func(ctx context.Context) (summary string, err error)

// ErrReloadRefused is wrapped by the error of a reload that changes a key
// a running hatchery cannot take (config.LiveKey).
var ErrReloadRefused = errors.New("reload refused")

// reloader is the daemon's ReloadFunc: one reload at a time.
type reloader struct {
	mu   sync.Mutex
	load func() (*config.Config, error)
	h    *vsphere.HatcheryVSphere
	fw   *hatchery.Framework
	log  *slog.Logger
	// notify tells systemd of the reload (RELOADING=1, then READY=1).
	notify *notifier
	// setLogLevel applies an applied configuration's logLevel (nil: the
	// level never changes).
	setLogLevel func(string)
}

// reload is the ReloadFunc (ReloadFunc's doc).
func (r *reloader) reload(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("reload configuration: %w", err)
	}
	r.notify.reloading()
	summary, err := r.apply()
	state := "running; last reload: " + summary
	if err != nil {
		state = "running; last reload failed, configuration kept"
		if errors.Is(err, ErrReloadRefused) {
			state = "running; last reload " + summary + ", configuration kept"
		}
	}
	r.notify.up(state, true)
	return summary, err
}

// apply is one reload, the caller holding r.mu.
func (r *reloader) apply() (string, error) {
	if r.load == nil {
		err := errors.New("reload configuration: the daemon was started without a configuration file to read again")
		r.log.Error("configuration reload failed, running configuration kept", logkey.Err, err)
		return "", err
	}
	next, err := r.load()
	if err != nil {
		// config errors never hold a secret (internal/config).
		r.log.Error("configuration reload failed, running configuration kept", logkey.Err, err)
		return "", fmt.Errorf("reload configuration: %w", err)
	}
	next.Normalize()
	changed := config.ChangedKeys(r.h.Config(), next)
	var refused []string
	for _, k := range changed {
		if !config.LiveKey(k) {
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 {
		err := fmt.Errorf("reload configuration: %w: %s cannot change while the hatchery runs (restart it); running configuration kept", ErrReloadRefused, strings.Join(refused, ", "))
		r.log.Error("configuration reload refused, running configuration kept", "refused", refused)
		return "refused: " + strings.Join(refused, ", "), err
	}
	if len(changed) == 0 {
		r.log.Info("configuration reloaded", "changed", "nothing")
		return "configuration unchanged", nil
	}
	r.h.Reconfigure(next)
	r.fw.SetMaxWorker(next.CommonConfiguration.Provision.MaxWorker)
	if r.setLogLevel != nil {
		r.setLogLevel(next.LogLevel)
	}
	r.log.Info("configuration reloaded", "changed", changed)
	return "changed: " + strings.Join(changed, ", "), nil
}

// serveReloads calls reload for each signal received on sigs until ctx
// ends (the SIGHUP handler: Options.Reload).
func serveReloads(ctx context.Context, sigs <-chan os.Signal, reload ReloadFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
			_, _ = reload(ctx) // logged by reload
		}
	}
}
