package vsphere

import (
	"fmt"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
)

// ShownPlacements is the placement set operators see and act on
// (/mon/status, the metrics, ctl placement): the hatchery's (Placements),
// but nil while it has none and without [[placements]] entries. Without
// entries the top-level keys are the one placement "default", which no
// decision reads or steers (its figures are never read, its clones not
// counted, a cordon would change nothing: docs/operations.md#placements):
// its zeros would mislead.
func (h *HatcheryVSphere) ShownPlacements() placement.Set {
	if len(h.conf().Placements) == 0 {
		return nil
	}
	return h.Placements()
}

// placementStatusLines are the /mon/status lines of the placements: one
// per placement ("placement/NAME"), in configuration order, with its state
// and why, what this hatchery runs there, its headroom, its clones and its
// datastores. None without a set (the hatchery has not built it).
//
// The levels (docs/operations.md#placements): a placement backing off or
// probing is in alert (clones failed there with faults that point at it,
// and no clone has shown it is over); a cordoned one is WARN: an
// operator's choice, but capacity out of service that a status reader
// must see (the drain's line is WARN for the same reason); an active one
// is OK, WARN when one of its datastores is inaccessible or below its
// floor (it takes no clone there).
func placementStatusLines(set placement.Set) []sdk.MonitoringStatusLine {
	if set == nil {
		return nil
	}
	sts := set.Statuses()
	lines := make([]sdk.MonitoringStatusLine, 0, len(sts))
	for _, s := range sts {
		lines = append(lines, placementStatusLine(s))
	}
	return lines
}

// placementStatusLine renders one placement.
func placementStatusLine(s placement.Status) sdk.MonitoringStatusLine {
	var b strings.Builder
	b.WriteString(string(s.State))
	if !s.Until.IsZero() {
		fmt.Fprintf(&b, " until %s", s.Until.UTC().Format(time.RFC3339))
	}
	if s.Reason != "" {
		fmt.Fprintf(&b, ": %s", s.Reason)
	}
	fmt.Fprintf(&b, "; %d VMs (%d vCPUs, %d MB), headroom %s, clones: %d in flight, %d sent, %d failed",
		s.VMs, s.CPUs, s.MemoryMB, headroomText(s.HeadroomCPUs, s.HeadroomMemoryMB), s.TasksInFlight, s.Clones, s.CloneFailures)
	short := false
	for i, d := range s.Datastores {
		sep := ", "
		if i == 0 {
			sep = "; datastores "
		}
		fmt.Fprintf(&b, "%s%s %s", sep, d.Name, datastoreText(d))
		if !d.Accessible || d.FreeBytes < d.FloorBytes {
			short = true
		}
	}
	l := sdk.MonitoringStatusLine{Component: "placement/" + s.Name, Value: b.String(), Status: sdk.MonitoringStatusOK}
	switch {
	case s.State == placement.StateBackingOff || s.State == placement.StateProbing:
		l.Status = sdk.MonitoringStatusAlert
	case s.State == placement.StateCordoned || short:
		l.Status = sdk.MonitoringStatusWarn
	}
	return l
}

// headroomText is a placement's headroom: "8 vCPUs and 16384 MB", a
// figure nothing limits said as such.
func headroomText(cpus, memoryMB int64) string {
	c, m := "no vCPU limit", "no memory limit"
	if cpus != placement.Unknown {
		c = fmt.Sprintf("%d vCPUs", cpus)
	}
	if memoryMB != placement.Unknown {
		m = fmt.Sprintf("%d MB", memoryMB)
	}
	return c + " and " + m
}

// datastoreText is one datastore: "120/500 GB free (floor 50 GB)", and
// why it takes no clone when it does not.
func datastoreText(d placement.DatastoreStatus) string {
	switch {
	case !d.Accessible && d.CapacityBytes == 0:
		return "not read" // the decision could not read it
	case !d.Accessible:
		return "inaccessible"
	}
	t := fmt.Sprintf("%d/%d GB free (floor %d GB)", d.FreeBytes>>30, d.CapacityBytes>>30, d.FloorBytes>>30)
	if d.FreeBytes < d.FloorBytes {
		t += " below its floor"
	}
	return t
}
