package vsphere

import "github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"

// timingReporter reports the timing of a successful spawn with the
// hatchery's current logger, metrics and CDS client (internal/spawntiming).
func (h *HatcheryVSphere) timingReporter() spawntiming.Reporter {
	return spawntiming.Reporter{
		Hatchery:           h.Name(),
		Metrics:            h.metrics,
		Log:                h.log,
		CDS:                h.cds,
		SlowStartThreshold: h.conf().SlowStartThresholdDuration(),
		Now:                h.now,
		OnTimed:            h.onTimed,
	}
}
