// Package spawnfault says what a failed spawn or warm-pool provisioning
// points at: the template (or a VM made from it), vCenter itself, or
// neither (no room, no free IP, the job gone, shutdown). The quarantine of
// broken templates counts only the first (docs/design.md#quarantine); a
// vCenter outage fails no job. It also tells whether vCenter answered a
// request at all (IsVCenterFault), which decides whether a failed clone's
// outcome is known.
//
// The spawn path marks the steps whose failure blames the template
// (MarkTemplate); Classify reads the marks and the faults with
// errors.As and fault.Is, never the text. Pure: no vCenter call.
package spawnfault
