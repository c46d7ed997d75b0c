package vsphere_test

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// SPAWN_TRACE=1 (with `make bench-latency` or any run of the latency
// benchmarks) puts a vcsimtest.Recorder between the hatchery's client and
// the simulator and prints, per scenario, every request of its spawns: the
// method, the object it is sent to, the objects and properties it reads,
// and for a long poll what it was answered (objects, properties, values).
// It says where the per-path counts of BenchmarkSpawnPaths come from.

var (
	traceMethod = regexp.MustCompile(`<Body[^>]*>\s*<([A-Za-z_]+)`)
	traceThis   = regexp.MustCompile(`<_this[^>]*type="([^"]+)"[^>]*>([^<]*)<`)
	traceObj    = regexp.MustCompile(`<obj[^>]*type="([^"]+)"[^>]*>([^<]*)<`)
	traceType   = regexp.MustCompile(`<obj[^>]*type="([^"]+)"`)
	traceName   = regexp.MustCompile(`<name>([^<]*)</name>`)
	traceVal    = regexp.MustCompile(`<val[^>]*>([^<]{0,20})<`)
	tracePath   = regexp.MustCompile(`<pathSet>([^<]*)<`)
)

// traceExchanges prints one line per recorded request of a scenario: when
// it was sent and answered (ms since the burst was queued), then what it
// was; then each job's stage boundaries on the same clock.
func traceExchanges(w io.Writer, name string, ex []vcsimtest.Exchange, queued time.Time, timings []spawntiming.Timing) {
	fmt.Fprintln(w, "trace", name, len(ex), "requests answered")
	ms := func(t time.Time) string { return fmt.Sprintf("%6.1f", float64(t.Sub(queued).Microseconds())/1000) }
	for _, e := range ex {
		req := string(e.Request)
		line := "?"
		m := traceMethod.FindStringSubmatch(req)
		if m != nil {
			line = m[1]
		}
		if t := traceThis.FindStringSubmatch(req); t != nil {
			line += " this=" + t[1] + ":" + t[2]
		}
		for _, o := range traceObj.FindAllStringSubmatch(req, -1) {
			line += " obj=" + o[1] + ":" + o[2]
		}
		for _, p := range tracePath.FindAllStringSubmatch(req, -1) {
			line += " " + p[1]
		}
		if m != nil && m[1] == "WaitForUpdatesEx" {
			res := string(e.Response)
			line += " ->"
			for _, o := range traceType.FindAllStringSubmatch(res, -1) {
				line += " " + o[1]
			}
			for _, o := range traceName.FindAllStringSubmatch(res, -1) {
				line += " " + o[1]
			}
			for _, o := range traceVal.FindAllStringSubmatch(res, -1) {
				line += " =" + o[1]
			}
		}
		fmt.Fprintln(w, "  ", ms(e.Sent), ms(e.Answered), line)
	}
	for j, t := range timings {
		at, line := queued, fmt.Sprintf("   job %d:", j)
		for _, s := range t.Stages {
			at = at.Add(s.D)
			line += fmt.Sprintf(" %s@%s", s.Stage, strings.TrimSpace(ms(at)))
		}
		fmt.Fprintln(w, line)
	}
}
