package config

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"
)

// Operations keys (docs/operations.md): the drain at stop and the ctl
// socket.
const (
	// DefaultDrainTimeout is drainTimeout's default, in seconds: how long
	// a stop (SIGTERM) waits for the spawns in flight to finish before the
	// shutdown; the unit's TimeoutStopSec (configs/hatchery-vsphere.service)
	// covers it plus the shutdown's own bound.
	DefaultDrainTimeout = 120
	// MaxDrainTimeout bounds drainTimeout (seconds): one hour.
	MaxDrainTimeout = 3600
	// CtlSocketName is the ctl socket's file name in the service's
	// runtime directory, where it is by default.
	CtlSocketName = "ctl.sock"
	// DefaultCtlSocket is where the ctl socket is with the unit
	// (RuntimeDirectory=hatchery-vsphere), and where `ctl` looks by default.
	DefaultCtlSocket = "/run/hatchery-vsphere/" + CtlSocketName
)

// DrainTimeoutDuration is drainTimeout (seconds): how long a stop waits
// for the spawns in flight; 0 stops without draining.
func (c *Config) DrainTimeoutDuration() time.Duration {
	if c.DrainTimeout <= 0 {
		return 0
	}
	return time.Duration(min(c.DrainTimeout, MaxDrainTimeout)) * time.Second
}

// CtlSocketPath is where the daemon listens for `ctl`: ctlSocket when set,
// else ctl.sock in the first directory of $RUNTIME_DIRECTORY (which systemd
// sets for a unit with RuntimeDirectory=), else "" (no ctl socket).
func (c *Config) CtlSocketPath(lookupEnv func(string) (string, bool)) string {
	if p := strings.TrimSpace(c.CtlSocket); p != "" {
		return p
	}
	if lookupEnv == nil {
		return ""
	}
	dirs, _ := lookupEnv("RUNTIME_DIRECTORY")
	dir, _, _ := strings.Cut(dirs, ":")
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, CtlSocketName)
}

// validateOperations checks drainTimeout and ctlSocket.
func (c *Config) validateOperations(es *Errors) {
	if v := c.DrainTimeout; v < 0 || v > MaxDrainTimeout {
		es.add("drainTimeout", "%d is out of range: must be 0-%d seconds (0: a stop does not drain)", v, MaxDrainTimeout)
	}
	if p := strings.TrimSpace(c.CtlSocket); p != "" && !filepath.IsAbs(p) {
		es.add("ctlSocket", "%q: must be an absolute path (a unix socket; empty: ctl.sock in $RUNTIME_DIRECTORY)", p)
	}
	if c.LogLevel != "" {
		if _, err := ParseLogLevel(c.LogLevel); err != nil {
			es.add("logLevel", "%q: want debug, info, warn or error (empty: the --log-level flag's)", c.LogLevel)
		}
	}
}

// ParseLogLevel reads a log level as logLevel and --log-level name it:
// debug, info, warn or error, in any case.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug", "info", "warn", "error":
		if err := l.UnmarshalText([]byte(strings.ToUpper(strings.TrimSpace(s)))); err != nil {
			return 0, fmt.Errorf("log level %q: %w", s, err)
		}
		return l, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
}
