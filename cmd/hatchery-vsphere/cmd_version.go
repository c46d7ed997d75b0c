package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time by `make build` and `make package` (the version is
// `git describe --tags --always --dirty`):
//
//	go build -ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)" ./cmd/hatchery-vsphere
var (
	version = "dev"
	commit  = "dev"
)

// govmomiModule is the module whose version `version` reports: the
// vCenter client the binary was linked with.
const govmomiModule = "github.com/vmware/govmomi"

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

// moduleVersion is the version of module path linked into the binary
// ("unknown" when the binary carries no build information), a replaced
// module's replacement version included.
func moduleVersion(bi *debug.BuildInfo, path string) string {
	if bi == nil {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		if d.Replace != nil && d.Replace.Version != "" {
			return d.Replace.Version
		}
		return d.Version
	}
	return "unknown"
}

// cmdVersion prints "hatchery-vsphere VERSION (commit COMMIT, GOVERSION,
// govmomi GOVMOMIVERSION)".
func (a *app) cmdVersion(args []string) int {
	fs := a.flagSet("version")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return exitUsage
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintf(a.stdout, "hatchery-vsphere %s (commit %s, %s, govmomi %s)\n", version, buildCommit(), runtime.Version(), moduleVersion(bi, govmomiModule))
	return exitOK
}
