package vsphere

import (
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
)

// timingReporter reports the timing of a successful spawn with the
// hatchery's current logger, metrics and CDS client (internal/spawntiming).
func (h *HatcheryVSphere) timingReporter() spawntiming.Reporter {
	return h.timingReporterAt(h.conf().SlowStartThresholdDuration())
}

// timingReporterAt is timingReporter with slowStartThreshold given (a
// job's spawn: its plan's).
func (h *HatcheryVSphere) timingReporterAt(slowStart time.Duration) spawntiming.Reporter {
	return spawntiming.Reporter{
		Hatchery:           h.Name(),
		Metrics:            h.metrics,
		Log:                h.log,
		CDS:                h.cds,
		SlowStartThreshold: slowStart,
		Now:                h.now,
		OnTimed:            h.onTimed,
	}
}
