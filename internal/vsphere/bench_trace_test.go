package vsphere_test

import (
	"fmt"
	"io"
	"regexp"

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

// traceExchanges prints one line per recorded request of a scenario.
func traceExchanges(w io.Writer, name string, ex []vcsimtest.Exchange) {
	fmt.Fprintln(w, "trace", name, len(ex), "requests answered")
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
		fmt.Fprintln(w, "  ", line)
	}
}
