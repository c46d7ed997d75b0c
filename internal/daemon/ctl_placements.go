package daemon

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/ctl"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
)

// placementUsage is the answer to a wrong `placement` command.
const placementUsage = "placement list | placement cordon NAME | placement uncordon NAME"

// placementData is one placement of `ctl placement list --json` (and the
// placement a cordon or uncordon answers).
type placementData struct {
	Name   string     `json:"name"`
	State  string     `json:"state"`
	Until  *time.Time `json:"until,omitempty"`
	Reason string     `json:"reason,omitempty"`
	VMs    int        `json:"vms"`
	VCPUs  int64      `json:"vcpus"`
	// MemoryMB is what this hatchery's VMs use there.
	MemoryMB int64 `json:"memory_mb"`
	// HeadroomVCPUs and HeadroomMemoryMB are absent when nothing limits
	// them (placement.Unknown).
	HeadroomVCPUs    *int64          `json:"headroom_vcpus,omitempty"`
	HeadroomMemoryMB *int64          `json:"headroom_memory_mb,omitempty"`
	TasksInFlight    int             `json:"tasks_in_flight"`
	Clones           uint64          `json:"clones"`
	CloneFailures    uint64          `json:"clone_failures"`
	Datastores       []datastoreData `json:"datastores"`
}

// datastoreData is one datastore of a placement.
type datastoreData struct {
	Name          string `json:"name"`
	FreeBytes     int64  `json:"free_bytes"`
	CapacityBytes int64  `json:"capacity_bytes"`
	FloorBytes    int64  `json:"floor_bytes"`
	Accessible    bool   `json:"accessible"`
}

func placementDataOf(s placement.Status) placementData {
	d := placementData{Name: s.Name, State: string(s.State), Reason: s.Reason, VMs: s.VMs, VCPUs: s.CPUs, MemoryMB: s.MemoryMB,
		TasksInFlight: s.TasksInFlight, Clones: s.Clones, CloneFailures: s.CloneFailures, Datastores: []datastoreData{}}
	if !s.Until.IsZero() {
		u := s.Until.UTC()
		d.Until = &u
	}
	if s.HeadroomCPUs != placement.Unknown {
		v := s.HeadroomCPUs
		d.HeadroomVCPUs = &v
	}
	if s.HeadroomMemoryMB != placement.Unknown {
		v := s.HeadroomMemoryMB
		d.HeadroomMemoryMB = &v
	}
	for _, ds := range s.Datastores {
		d.Datastores = append(d.Datastores, datastoreData{Name: ds.Name, FreeBytes: ds.FreeBytes, CapacityBytes: ds.CapacityBytes,
			FloorBytes: ds.FloorBytes, Accessible: ds.Accessible})
	}
	return d
}

// placementReads tells a `placement list` (a read, logged at DEBUG) from
// a cordon or uncordon (an action, logged at INFO with the caller's uid).
func placementReads(args []string) bool { return len(args) == 0 || args[0] == "list" }

// placementCmd is `placement list|cordon NAME|uncordon NAME`
// (docs/operations.md#placements).
func (t *ctlTarget) placementCmd(_ context.Context, peer ctl.Peer, args []string) (ctl.Result, error) {
	switch {
	case len(args) == 1 && args[0] == "list":
		return t.placementList(), nil
	case len(args) == 2 && args[0] == "cordon":
		return t.placementChange(args[1], peer, "cordon")
	case len(args) == 2 && args[0] == "uncordon":
		return t.placementChange(args[1], peer, "uncordon")
	}
	return ctl.Result{}, fmt.Errorf("%w: %s", ctl.ErrUsage, placementUsage)
}

// placementSet is the hatchery's placement set; nil without
// [[placements]] (or until it is built).
func (t *ctlTarget) placementSet() placement.Set {
	if t.placements == nil {
		return nil
	}
	return t.placements()
}

// placementList is every placement: a table, then the datastores.
func (t *ctlTarget) placementList() ctl.Result {
	data := []placementData{}
	if set := t.placementSet(); set != nil {
		for _, s := range set.Statuses() {
			data = append(data, placementDataOf(s))
		}
	}
	var b strings.Builder
	if len(data) == 0 {
		b.WriteString("no [[placements]]: every clone goes to the top-level resource pool and datastore\n")
		return ctl.Result{Text: b.String(), Data: data}
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tVMS\tVCPUS\tMEMORY\tHEADROOM\tIN-FLIGHT\tCLONES\tFAILED\tREASON")
	for _, p := range data {
		state := p.State
		if p.Until != nil {
			state += " until " + p.Until.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d MB\t%s\t%d\t%d\t%d\t%s\n", p.Name, state, p.VMs, p.VCPUs, p.MemoryMB,
			headroomOf(p), p.TasksInFlight, p.Clones, p.CloneFailures, dash(p.Reason))
	}
	tw.Flush()
	fmt.Fprintln(&b, "datastores:")
	for _, p := range data {
		if len(p.Datastores) == 0 {
			fmt.Fprintf(&b, "  %s: none read yet\n", p.Name)
		}
		for _, d := range p.Datastores {
			if !d.Accessible {
				what := "inaccessible"
				if d.CapacityBytes == 0 {
					what = "not read"
				}
				fmt.Fprintf(&b, "  %s %s: %s\n", p.Name, d.Name, what)
				continue
			}
			below := ""
			if d.FreeBytes < d.FloorBytes {
				below = ", below its floor: no clone goes there"
			}
			fmt.Fprintf(&b, "  %s %s: %d/%d GB free, floor %d GB%s\n", p.Name, d.Name, d.FreeBytes>>30, d.CapacityBytes>>30, d.FloorBytes>>30, below)
		}
	}
	return ctl.Result{Text: b.String(), Data: data}
}

// headroomOf is a placement's headroom: "10 vCPUs, 20480 MB", "-" for a
// figure nothing limits.
func headroomOf(p placementData) string {
	c, m := "-", "-"
	if p.HeadroomVCPUs != nil {
		c = fmt.Sprintf("%d vCPUs", *p.HeadroomVCPUs)
	}
	if p.HeadroomMemoryMB != nil {
		m = fmt.Sprintf("%d MB", *p.HeadroomMemoryMB)
	}
	return c + ", " + m
}

// placementChange cordons or uncordons the placement named, for peer, and
// answers the placement as it is then.
func (t *ctlTarget) placementChange(name string, peer ctl.Peer, verb string) (ctl.Result, error) {
	set := t.placementSet()
	if set == nil {
		return ctl.Result{}, fmt.Errorf("%s placement %q: the configuration has no [[placements]]", verb, name)
	}
	change, text := set.Cordon, "placement %s cordoned: no new clone goes there; its VMs run on and its idle warm-pool VMs are still claimed\n"
	if verb == "uncordon" {
		change, text = set.Uncordon, "placement %s uncordoned: it takes clones again\n"
	}
	if err := change(name, peer.String()); err != nil {
		return ctl.Result{}, err
	}
	res := ctl.Result{Text: fmt.Sprintf(text, name)}
	for _, s := range set.Statuses() {
		if s.Name == name {
			res.Data = placementDataOf(s)
		}
	}
	return res, nil
}
