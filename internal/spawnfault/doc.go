// Package spawnfault says what a failed spawn or warm-pool provisioning
// points at: the template (or a VM made from it), vCenter itself, or
// neither (no room, no free IP, the job gone, shutdown). The quarantine of
// broken templates counts only the first (docs/design.md#quarantine); a
// vCenter outage fails no job. It also tells whether vCenter answered a
// request at all (IsVCenterFault), which decides whether a failed clone's
// outcome is known.
//
// The spawn path marks the steps whose failure blames the template
// (MarkTemplate); Classify reads the marks with errors.As and the faults by
// their kind (vctypes.KindOf: internal/vcenter classified them where they
// left the port, vcenter.Classify), never by text. Pure: no vCenter call,
// no govmomi import.
package spawnfault
