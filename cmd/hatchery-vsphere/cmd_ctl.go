package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
)

// ctlUsage is printed on a wrong `ctl` command line.
const ctlUsage = `usage: hatchery-vsphere ctl [--socket PATH] [--json] <command> [args]

commands (docs/operations.md#ctl):
  status                      connection, queues, capacity, pools, quarantines, holds, drain
  vms                         this hatchery's VMs: phase, job, model, flavor, power, IP, age
  quarantine lift TEMPLATE    end a template's (or V1 model's) quarantine now
  hold release VM             end a VM's debug hold: the cleanup deletes it
  drain                       take no new job; spawns in flight finish (stop the service next)
  reload                      re-read the configuration, as systemctl reload does
  placement list              the placements: state, VMs, headroom, clones, datastores
  placement cordon NAME       send no new clone to the placement (its VMs run on)
  placement uncordon NAME     put a cordoned placement back in service

--socket defaults to ` + config.DefaultCtlSocket + `; the socket answers the
service's user and root only (sudo -u hatchery-vsphere hatchery-vsphere ctl status).
`

// cmdCtl is `ctl [--socket PATH] [--json] COMMAND [ARGS] [--json]`: one
// request to the daemon's ctl socket; its answer on stdout (human text, or
// the JSON facts with --json), a refusal on stderr with exit code 1, a
// wrong request (unknown command, wrong arguments) with exit code 2.
func (a *app) cmdCtl(ctx context.Context, args []string) int {
	fs := a.flagSet("ctl")
	fs.Usage = func() { fmt.Fprint(a.stderr, ctlUsage) }
	socket := fs.String("socket", config.DefaultCtlSocket, "the daemon's ctl socket")
	asJSON := fs.Bool("json", false, "print the answer as JSON, for scripts")
	if fs.Parse(args) != nil {
		return exitUsage
	}
	var rest []string
	for _, w := range fs.Args() { // --json may follow the command too
		if w == "--json" || w == "-json" {
			*asJSON = true
			continue
		}
		rest = append(rest, w)
	}
	if len(rest) == 0 {
		fmt.Fprint(a.stderr, ctlUsage)
		return exitUsage
	}
	resp, err := ctl.Do(ctx, *socket, ctl.Request{Command: rest[0], Args: rest[1:]})
	if err != nil {
		fmt.Fprintf(a.stderr, "ctl: %v\n", err)
		return exitFail
	}
	if !resp.OK {
		fmt.Fprintf(a.stderr, "ctl %s: %s\n", rest[0], resp.Error)
		if resp.Usage {
			// An unknown command or arguments it does not take: a wrong
			// command line (docs/operations.md).
			return exitUsage
		}
		return exitFail
	}
	if *asJSON {
		var out bytes.Buffer
		data := resp.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		if err := json.Indent(&out, data, "", "  "); err != nil {
			fmt.Fprintf(a.stderr, "ctl %s: answer: %v\n", rest[0], err)
			return exitFail
		}
		out.WriteByte('\n')
		a.stdout.Write(out.Bytes())
		return exitOK
	}
	fmt.Fprint(a.stdout, resp.Text)
	return exitOK
}
