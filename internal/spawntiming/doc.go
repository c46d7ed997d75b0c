// Package spawntiming measures where a spawn's time goes: the fixed set
// of stages a spawn goes through (queue to book, book to clone, clone or
// claim, power on, IP, guest ready, launch), the clock a spawn carries in
// its context and marks at each stage boundary, and the report at the end
// of a successful spawn: the spawn_stage_seconds and job start histograms
// (docs/metrics.md), one log line, and a spawn info on the job when the
// start was slower than slowStartThreshold.
//
// It does not spawn: the hatchery (internal/vsphere) starts a clock, marks
// stages through the context and hands the clock to a Reporter.
package spawntiming
