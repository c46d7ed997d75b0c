package daemon

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/vsphere"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// ctlTarget is what the ctl commands read and act on.
type ctlTarget struct {
	cfg    func() *config.Config // the running configuration (a reload replaces it)
	fw     *hatchery.Framework
	h      *vsphere.HatcheryVSphere
	reload ReloadFunc
	now    func() time.Time
	// placements returns the hatchery's placement set as operators see
	// it (vsphere.HatcheryVSphere.ShownPlacements: nil without
	// [[placements]]).
	placements func() placement.Set
}

// ctlCommands are the commands of `hatchery-vsphere ctl`
// (docs/operations.md#ctl).
func ctlCommands(t *ctlTarget) map[string]ctl.Command {
	return map[string]ctl.Command{
		"status":     {Run: t.status},
		"vms":        {Run: t.vms},
		"quarantine": {Action: true, Run: t.quarantine},
		"hold":       {Action: true, Run: t.hold},
		"drain":      {Action: true, Run: t.drain},
		"reload":     {Action: true, Run: t.reloadCmd},
		"placement":  {Action: true, Reads: placementReads, Run: t.placementCmd},
	}
}

// statusData is `ctl status --json`.
type statusData struct {
	Lines    []sdk.MonitoringStatusLine `json:"lines"`
	Pools    []poolData                 `json:"pools"`
	Holds    []hatchery.HeldWorker      `json:"holds"`
	Draining bool                       `json:"draining"`
	Drained  bool                       `json:"drained"`
	InFlight int                        `json:"in_flight"`
}

// poolData is one warm pool: its entry and the VMs it has.
type poolData struct {
	Model     string `json:"model"`
	Flavor    string `json:"flavor,omitempty"`
	IdleState string `json:"idle_state"`
	Want      int    `json:"want"`
	Have      int    `json:"have"`
	// Reason says why the pool wants Want (fixed: its number; else the
	// demand's reason, docs/warm-pools.md), with its figures in Detail;
	// HitRatio is the share of its Starts that took a ready VM.
	Reason   string  `json:"reason,omitempty"`
	Detail   string  `json:"detail,omitempty"`
	HitRatio float64 `json:"hit_ratio"`
	Starts   int     `json:"starts"`
}

func noArgs(cmd string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no argument, got %q", cmd, strings.Join(args, " "))
	}
	return nil
}

// status is one screen: the /mon/status lines (connection, queues,
// capacity, quarantines, drain), the warm pools, the debug holds.
func (t *ctlTarget) status(ctx context.Context, _ ctl.Peer, args []string) (ctl.Result, error) {
	if err := noArgs("status", args); err != nil {
		return ctl.Result{}, err
	}
	st := t.fw.Status(ctx)
	d := statusData{Lines: st.Lines, Holds: t.h.HeldWorkers(ctx), Draining: t.fw.Draining(), Drained: t.fw.Drained(), InFlight: t.fw.InFlight()}
	if d.Holds == nil {
		d.Holds = []hatchery.HeldWorker{}
	}
	vms, vmErr := t.h.OperatorVMs(ctx)
	sizing := t.h.PoolStatus()
	for _, p := range t.cfg().WorkerProvisioning {
		pd := poolData{Model: p.ModelVMWare, Flavor: p.Flavor, IdleState: p.State(), Want: p.Number}
		if pd.Model == "" {
			pd.Model = p.ModelPath
		}
		if p.Scales() {
			pd.Want = p.Min // until the first pass decides
		}
		for _, s := range sizing {
			if s.Key.Model == pd.Model && s.Key.Flavor == config.FlavorName(p.Flavor) && s.Key.V1 == (p.ModelPath != "") {
				pd.Want, pd.Reason, pd.Detail, pd.HitRatio, pd.Starts = s.Target, string(s.Reason), s.Detail, s.HitRatio, s.Starts
			}
		}
		for _, v := range vms {
			if v.WarmPool && v.Model == pd.Model && v.Flavor == p.Flavor {
				pd.Have++
			}
		}
		d.Pools = append(d.Pools, pd)
	}
	if d.Pools == nil {
		d.Pools = []poolData{}
	}

	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "hatchery %s, %s\n", t.cfg().CommonConfiguration.Name, st.Now.UTC().Format(time.RFC3339))
	for _, l := range st.Lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Status, l.Component, l.Value)
	}
	tw.Flush()
	fmt.Fprintln(&b, "warm pools:")
	switch {
	case len(d.Pools) == 0:
		fmt.Fprintln(&b, "  none configured")
	case vmErr != nil:
		fmt.Fprintf(&b, "  unknown: %v\n", vmErr)
	}
	for _, p := range d.Pools {
		if vmErr != nil {
			break
		}
		fl := p.Flavor
		if fl == "" {
			fl = "neutral"
		}
		fmt.Fprintf(&b, "  %s (%s, %s): %d/%d", p.Model, fl, p.IdleState, p.Have, p.Want)
		if p.Reason != "" {
			fmt.Fprintf(&b, ", %s: %s", p.Reason, p.Detail)
		}
		if p.Starts > 0 {
			fmt.Fprintf(&b, ", warm starts %.0f%% of %d", 100*p.HitRatio, p.Starts)
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintln(&b, "debug holds:")
	if len(d.Holds) == 0 {
		fmt.Fprintln(&b, "  none")
	}
	for _, h := range d.Holds {
		fmt.Fprintf(&b, "  %s until %s: %s\n", h.Name, h.Until.UTC().Format(time.RFC3339), h.Reason)
	}
	return ctl.Result{Text: b.String(), Data: d}, nil
}

// vms lists the hatchery's VMs: phase, job, model, flavor, age.
func (t *ctlTarget) vms(ctx context.Context, _ ctl.Peer, args []string) (ctl.Result, error) {
	if err := noArgs("vms", args); err != nil {
		return ctl.Result{}, err
	}
	vms, err := t.h.OperatorVMs(ctx)
	if err != nil {
		return ctl.Result{}, err
	}
	if vms == nil {
		vms = []vsphere.VMInfo{}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tJOB\tMODEL\tFLAVOR\tPOWER\tIP\tAGE")
	now := t.now()
	for _, v := range vms {
		power := "off"
		if v.PoweredOn {
			power = "on"
		}
		age := "-"
		if !v.Created.IsZero() {
			age = now.Sub(v.Created).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Phase, dash(v.Job), dash(v.Model), dash(v.Flavor), power, dash(v.IP), age)
	}
	tw.Flush()
	fmt.Fprintf(&b, "%d VMs\n", len(vms))
	return ctl.Result{Text: b.String(), Data: vms}, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quarantine is `quarantine lift TEMPLATE`.
func (t *ctlTarget) quarantine(_ context.Context, peer ctl.Peer, args []string) (ctl.Result, error) {
	if len(args) != 2 || args[0] != "lift" {
		return ctl.Result{}, fmt.Errorf("%w: quarantine lift TEMPLATE (a template, a V1 model path, or the key the status names: \"template debian12\")", ctl.ErrUsage)
	}
	if err := t.h.LiftQuarantine(args[1], peer.String()); err != nil {
		return ctl.Result{}, err
	}
	return ctl.Result{Text: "quarantine of " + args[1] + " lifted: its jobs are served again\n", Data: map[string]string{"lifted": args[1]}}, nil
}

// hold is `hold release VM`.
func (t *ctlTarget) hold(ctx context.Context, peer ctl.Peer, args []string) (ctl.Result, error) {
	if len(args) != 2 || args[0] != "release" {
		return ctl.Result{}, fmt.Errorf("%w: hold release VM", ctl.ErrUsage)
	}
	if err := t.h.ReleaseHold(ctx, args[1], peer.String()); err != nil {
		return ctl.Result{}, err
	}
	return ctl.Result{Text: "hold of " + args[1] + " released: the next cleanup pass deletes it\n", Data: map[string]string{"released": args[1]}}, nil
}

// drainData is `ctl drain --json`.
type drainData struct {
	Drained  bool `json:"drained"`
	InFlight int  `json:"in_flight"`
}

// drain starts the drain (or reports the one under way) and answers at
// once; `ctl status` shows it until nothing is in flight.
func (t *ctlTarget) drain(_ context.Context, peer ctl.Peer, args []string) (ctl.Result, error) {
	if err := noArgs("drain", args); err != nil {
		return ctl.Result{}, err
	}
	t.fw.Drain(peer.String())
	d := drainData{Drained: t.fw.Drained(), InFlight: t.fw.InFlight()}
	text := fmt.Sprintf("draining: no new job is taken, %d in flight; `ctl status` says when it is drained\n", d.InFlight)
	if d.Drained {
		text = "drained: nothing in flight, no job is taken; stop the service now\n"
	}
	return ctl.Result{Text: text, Data: d}, nil
}

// reloadCmd is `reload`: the daemon's reload, as on SIGHUP.
func (t *ctlTarget) reloadCmd(ctx context.Context, _ ctl.Peer, args []string) (ctl.Result, error) {
	if err := noArgs("reload", args); err != nil {
		return ctl.Result{}, err
	}
	summary, err := t.reload(ctx)
	if err != nil {
		return ctl.Result{}, err
	}
	if !strings.HasSuffix(summary, "\n") {
		summary += "\n"
	}
	return ctl.Result{Text: summary, Data: map[string]string{"summary": strings.TrimSpace(summary)}}, nil
}
