// Command hatchery-vsphere runs the CDS vSphere hatchery.
//
// Subcommands: start, demo, config new, config check, version. Run
// `hatchery-vsphere help` for their flags. `demo` and its simulators are
// linked only with the build tag "demo"; the production build carries no
// simulator and no test code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGTERM (systemd stop) and SIGINT cancel the context every command runs under.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := newApp().run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
