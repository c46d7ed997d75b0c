package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time:
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/hatchery-vsphere
var (
	version = "dev"
	commit  = "dev"
)

// buildCommit is commit, or the VCS revision Go recorded when the ldflags
// did not set it.
func buildCommit() string {
	if commit != "dev" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return commit
}

// cmdVersion prints "hatchery-vsphere VERSION (commit COMMIT, GOVERSION)".
func (a *app) cmdVersion(args []string) int {
	fs := a.flagSet("version")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	fmt.Fprintf(a.stdout, "hatchery-vsphere %s (commit %s, %s)\n", version, buildCommit(), runtime.Version())
	return exitOK
}
