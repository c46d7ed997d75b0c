package vsphere

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/metrics"
	"github.com/cds-contrib/hatchery-vsphere/internal/placement"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
)

var (
	docBackticked = regexp.MustCompile("`([^`]+)`")
	docParens     = regexp.MustCompile(`\([^()]*\)`)
	promSelector  = regexp.MustCompile(`(cds_hatchery_vsphere_[a-z0-9_]+)\{([^}]*)\}`)
	promMatcher   = regexp.MustCompile(`([a-z_]+)\s*=\s*"([^"]*)"`)
)

// docOneOf reads the values docs/metrics.md lists for a label in the
// paragraph "`label` of `metric` is one of: `a` (…), `b` (…)…": the
// backticked words outside parentheses, up to the paragraph's first
// sentence end.
func docOneOf(t *testing.T, doc, label, metric string) []string {
	t.Helper()
	head := "`" + label + "` of `" + metric + "` is one of:"
	i := strings.Index(doc, head)
	require.GreaterOrEqual(t, i, 0, "docs/metrics.md lists the values of %s of %s", label, metric)
	par := doc[i+len(head):]
	par = par[:strings.Index(par, "\n\n")]
	par = docParens.ReplaceAllString(strings.ReplaceAll(par, "\n", " "), "")
	if end := strings.Index(par, ". "); end >= 0 {
		par = par[:end+1]
	}
	var out []string
	for _, m := range docBackticked.FindAllStringSubmatch(par, -1) {
		out = append(out, m[1])
	}
	return out
}

// docRowIs reads the values of label from the table row of metric:
// "`label` is `a`, `b` or `c`".
func docRowIs(t *testing.T, doc, label, metric string) []string {
	t.Helper()
	re := regexp.MustCompile("`" + label + "` is ((?:`[^`]+`(?:, | or )?)+)")
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `"+metric+"` |") {
			continue
		}
		m := re.FindStringSubmatch(line)
		require.NotNil(t, m, "the row of %s lists the values of %s", metric, label)
		var out []string
		for _, v := range docBackticked.FindAllStringSubmatch(m[1], -1) {
			out = append(out, v[1])
		}
		return out
	}
	t.Fatalf("no row for %s", metric)
	return nil
}

// docStageTable reads the first column of the table under "## Per-stage
// latency".
func docStageTable(t *testing.T, doc string) []string {
	t.Helper()
	i := strings.Index(doc, "## Per-stage latency")
	require.GreaterOrEqual(t, i, 0)
	var out []string
	in := false
	for _, line := range strings.Split(doc[i:], "\n") {
		switch {
		case strings.HasPrefix(line, "| stage |"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "| `"):
			out = append(out, docBackticked.FindStringSubmatch(line)[1])
		case in:
			return out
		}
	}
	return out
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func sorted(vs []string) []string {
	out := slices.Clone(vs)
	slices.Sort(out)
	return out
}

// TestMetricsDocLabelValues ties every label value docs/metrics.md lists
// to the code's fixed label sets, both ways: a value documented but never
// emitted, or emitted but undocumented, fails (as seven of the nine
// documented spawns_failed reasons were never emitted). A scrape's values
// must be documented too, and so must every value the Prometheus rules,
// their tests, the Grafana dashboard and the page's own queries select.
func TestMetricsDocLabelValues(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	doc := string(raw)

	type labelSet struct {
		metric, label string
		doc, code     []string
	}
	sets := []labelSet{
		{"spawns_failed", "reason", docOneOf(t, doc, "reason", "spawns_failed"), strs(metrics.SpawnFailureReasons)},
		{"capacity_refusals", "resource", docOneOf(t, doc, "resource", "capacity_refusals"), strs(metrics.CapacityResources)},
		{"collection_errors", "source", docRowIs(t, doc, "source", "cds_hatchery_vsphere_collection_errors"), strs(metrics.Sources)},
		{"provisioned_vm_count", "state", docRowIs(t, doc, "state", "cds_hatchery_vsphere_provisioned_vm_count"), metrics.ProvisionedStates},
		{"placement_state", "state", docRowIs(t, doc, "state", "cds_hatchery_vsphere_placement_state"), strs(placement.States)},
		{"spawn_stage_seconds", "stage", docStageTable(t, doc), strs(spawntiming.Stages)},
	}
	documented := map[string]map[string][]string{} // metric -> label -> values
	for _, s := range sets {
		assert.Equal(t, sorted(s.code), sorted(s.doc), "%s of %s: documented values = the code's", s.label, s.metric)
		if documented["cds_hatchery_vsphere_"+s.metric] == nil {
			documented["cds_hatchery_vsphere_"+s.metric] = map[string][]string{}
		}
		documented["cds_hatchery_vsphere_"+s.metric][s.label] = s.doc
	}

	// What a scrape shows is documented.
	for name, fam := range fullScrape(t) {
		labels := documented[name]
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if vals, ok := labels[lp.GetName()]; ok {
					assert.Contains(t, vals, lp.GetValue(), "%s{%s} scraped", name, lp.GetName())
				}
			}
		}
	}

	// What the rules, dashboards and queries select is documented.
	files := []string{metricsDoc}
	for _, glob := range []string{"../../configs/prometheus/*.yml", "../../configs/grafana/*.json"} {
		m, err := filepath.Glob(glob)
		require.NoError(t, err)
		files = append(files, m...)
	}
	selected := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		text := strings.ReplaceAll(string(b), `\"`, `"`)
		for _, sel := range promSelector.FindAllStringSubmatch(text, -1) {
			labels := documented[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(sel[1], "_bucket"), "_sum"), "_count")]
			for _, m := range promMatcher.FindAllStringSubmatch(sel[2], -1) {
				if vals, ok := labels[m[1]]; ok {
					selected++
					assert.Contains(t, vals, m[2], "%s selects %s{%s=%q}", filepath.Base(f), sel[1], m[1], m[2])
				}
			}
		}
	}
	assert.NotZero(t, selected, "the rules select label values: the scan found them")
}
