// Package metrics is the hatchery's metrics instrument: the OpenCensus
// measures and views (every name, label, bucket and help text of
// docs/metrics.md), one private meter and Prometheus registry per Metrics,
// the /mon/metrics handler, the scrape-time health gauges, the spawn,
// capacity-refusal and heartbeat counters, and Collect, which rebuilds the
// per-pass gauges from a Pass.
//
// It owns the fixed label sets: spawn failure reasons
// (SpawnFailureReason), exhausted resources (CapacityResource) and
// collection sources (Source), and the mappings to them: a failed spawn's
// error, marked by the spawn path (MarkSpawnFailure), to its reason
// (SpawnFailureReasonOf), a refusal code (sdk/refusal) to its resource
// (CapacityResourceOf). docs/metrics.md lists every value; a test of
// internal/vsphere ties the two.
//
// It does not read any state: what fills a Pass (the inventory, the
// resource pool, the configured IP ranges, the flavor headroom) is read by
// the hatchery's collector in internal/vsphere (RunMetrics), and the SOAP
// counters come from the vCenter client through the SOAP hook. It imports
// no other internal package (sdk/refusal only, for the codes).
package metrics
