package vcheck

import (
	"fmt"
	"slices"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/latencyfile"
)

// measure keeps the time of a passed result as a figure of the latency
// model's operation op.
func (r *runner) measure(op string, res *Result) {
	if res.Status != Pass {
		return
	}
	r.measured[op] = append(r.measured[op], res.Duration)
}

// writeLatency writes the measured operations, each its median, to
// Options.LatencyModel in the latency model's file form
// (internal/latencyfile): one line.
func (r *runner) writeLatency() {
	start := time.Now()
	f := latencyfile.File{Source: fmt.Sprintf("hatchery-vsphere vcenter check on %s, run %s", r.cfg.Endpoint, r.o.RunID)}
	for _, op := range latencyfile.Ops {
		ds := r.measured[op]
		if len(ds) == 0 {
			continue
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		note := fmt.Sprintf("median of %d", len(s))
		// At least a millisecond: the file's durations are positive.
		d := max(s[len(s)/2].Round(time.Millisecond), time.Millisecond)
		f.Latency = append(f.Latency, latencyfile.Entry{Op: op, Real: d.String(), Note: note})
	}
	err := latencyfile.Write(r.o.LatencyModel, f)
	res := r.outcome("latency model", r.o.LatencyModel, start, err, "choose a file the command may write")
	if err == nil {
		res.Detail = fmt.Sprintf("%d operation(s) measured: make bench-latency LATENCY_MODEL=%s", len(f.Latency), r.o.LatencyModel)
	}
}
