// Package collector computes the hatchery's gauges: one pass reads the
// inventory snapshot, the resource pool runtime, the flavor headroom and
// the SOAP counters, classifies the VMs (this hatchery's workers, its model
// templates, the whole pool) and the static IPs in use, and hands the
// result to metrics.Metrics.Collect in one step (docs/metrics.md).
//
// It owns no metric definition (internal/metrics does) and no loop: the
// hatchery (internal/vsphere) runs Collect on its metrics ticker. It reads
// vCenter only through its Port (vctypes.PoolReader, shared with
// internal/admission; vctypes.Port implements it).
package collector
