//go:build demo

package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/cds-contrib/hatchery-vsphere/internal/demo"
)

// runDemo is the hook `demo` calls: the in-process demo of internal/demo,
// with its vCenter and CDS API simulators. It is linked only with the build
// tag "demo" (`go run -tags demo ./cmd/hatchery-vsphere demo`), so that the
// production binary carries no simulator and no test code.
var runDemo DemoFunc = func(ctx context.Context, stdout io.Writer, logger *slog.Logger, f DemoFlags) error {
	_, err := demo.Run(ctx, demo.Options{Jobs: f.Jobs, Once: f.Once, Checks: f.Once, Listen: f.Listen, Instances: f.Instances, Soak: f.Soak, WriteConfig: f.WriteConfig, Stdout: stdout, Logger: logger})
	return err
}
