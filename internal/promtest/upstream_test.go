package promtest

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules giving upstream's metric names (docs/coexistence.md, "Metrics").
const (
	upstreamRulesFile     = "../../configs/prometheus/hatchery-vsphere-upstream.rules.yml"
	upstreamRulesTestFile = "../../configs/prometheus/hatchery-vsphere-upstream.rules_test.yml"
	coexistenceDoc        = "../../docs/coexistence.md"
)

// TestPromtoolUpstreamRules: the rules file is valid and every rule
// computes its upstream series from this hatchery's
// (configs/prometheus/hatchery-vsphere-upstream.rules_test.yml).
func TestPromtoolUpstreamRules(t *testing.T) {
	assert.Contains(t, promtool(t, "check", "rules", upstreamRulesFile), "SUCCESS")
	assert.Contains(t, promtool(t, "test", "rules", upstreamRulesTestFile), "SUCCESS")
}

var (
	recordLine   = regexp.MustCompile(`(?m)^\s+- record: ([a-z0-9_:]+)$`)
	anyCDSMetric = regexp.MustCompile(`cds_hatchery_[a-z0-9_]+`)
)

// TestUpstreamRulesRecordOnlyMissingNames: a rule records an upstream name
// this hatchery does not export (it would clash with the daemon's own
// series), listed in docs/coexistence.md's table; its expression reads
// metrics of docs/metrics.md; each rule has a unit test.
func TestUpstreamRulesRecordOnlyMissingNames(t *testing.T) {
	doc, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range docTableRow.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	coex, err := os.ReadFile(coexistenceDoc)
	require.NoError(t, err)
	rules, err := os.ReadFile(upstreamRulesFile)
	require.NoError(t, err)
	tests, err := os.ReadFile(upstreamRulesTestFile)
	require.NoError(t, err)
	records := recordLine.FindAllStringSubmatch(string(rules), -1)
	require.NotEmpty(t, records)
	recorded := map[string]bool{}
	for _, r := range records {
		name := r[1]
		recorded[name] = true
		assert.False(t, documented[name], "%s is exported by the daemon: a rule recording it would clash", name)
		assert.True(t, strings.Contains(string(coex), "`"+name+"`"), "docs/coexistence.md lists %s", name)
		assert.Contains(t, string(tests), "expr: "+name+"\n", "%s has a promtool unit test", name)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if strings.Contains(line, "- record:") || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, name := range anyCDSMetric.FindAllString(line, -1) {
			assert.True(t, documented[name], "%s reads %s, which docs/metrics.md does not document", upstreamRulesFile, name)
		}
	}
}
