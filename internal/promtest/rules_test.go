package promtest

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// promtoolTimeout bounds one promtool run: the unit tests evaluate a few
// hours of synthetic series in well under a second.
const promtoolTimeout = time.Minute

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), promtoolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, tool(t, "promtool"), args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestPromtoolCheckRules: the rules file is valid for Prometheus.
func TestPromtoolCheckRules(t *testing.T) {
	out := promtool(t, "check", "rules", rulesFile)
	assert.Contains(t, out, "SUCCESS")
}

// TestPromtoolTestRules: every alert fires, then resolves, on series shaped
// like a real scrape of the demo (configs/prometheus/hatchery-vsphere.rules_test.yml).
func TestPromtoolTestRules(t *testing.T) {
	out := promtool(t, "test", "rules", rulesTestFile)
	assert.Contains(t, out, "SUCCESS")
}

// TestPromtoolCheckScrapeConfig: the scrape example is a valid Prometheus
// configuration (its rule_files included).
func TestPromtoolCheckScrapeConfig(t *testing.T) {
	out := promtool(t, "check", "config", scrapeFile)
	assert.Contains(t, out, "SUCCESS")
}

var (
	alertLine     = regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`)
	nextStep      = regexp.MustCompile(`Next step: docs/troubleshooting\.md#([a-z0-9-]+)`)
	metricName    = regexp.MustCompile(`cds_hatchery_vsphere_[a-z0-9_]+`)
	docTableRow   = regexp.MustCompile("(?m)^\\| `(cds_hatchery_vsphere_[a-z0-9_]+)` \\| ([a-z]+) \\|")
	markdownTitle = regexp.MustCompile(`(?m)^#+ (.+)$`)
)

// anchor is the GitHub anchor of a Markdown title: lower case, punctuation
// but '-' and '_' dropped, spaces as '-'.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestAlertsAreComplete: every alert has a severity label, a summary and a
// description whose next step is a section of docs/troubleshooting.md that
// exists; each alert of the rules has a promtool unit test.
func TestAlertsAreComplete(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	tests, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	trouble, err := os.ReadFile(troubleDoc)
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range markdownTitle.FindAllStringSubmatch(string(trouble), -1) {
		anchors[anchor(m[1])] = true
	}

	text := string(rules)
	locs := alertLine.FindAllStringSubmatchIndex(text, -1)
	require.NotEmpty(t, locs)
	for i, loc := range locs {
		name := text[loc[2]:loc[3]]
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := text[loc[0]:end]
		assert.Regexp(t, `(?m)^\s+severity: (critical|warning)$`, body, name)
		assert.Regexp(t, `(?m)^\s+summary: \S`, body, name)
		assert.Contains(t, body, "description:", name)
		step := nextStep.FindStringSubmatch(body)
		if assert.NotNil(t, step, "%s: description names no docs/troubleshooting.md section", name) {
			assert.True(t, anchors[step[1]], "%s: docs/troubleshooting.md has no section #%s", name, step[1])
		}
		assert.Contains(t, string(tests), "alertname: "+name, "%s has no promtool unit test", name)
	}
}

// TestShippedExpressionsUseExportedMetrics: every cds_hatchery_vsphere_*
// name of the rules, the rule tests and the dashboard is a metric of
// docs/metrics.md (itself checked against a real scrape by
// internal/vsphere's TestMetricsDocMatchesScrape).
func TestShippedExpressionsUseExportedMetrics(t *testing.T) {
	doc, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	documented := map[string]string{}
	for _, m := range docTableRow.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = m[2]
	}
	require.NotEmpty(t, documented)
	for _, f := range []string{rulesFile, rulesTestFile, dashboardFile} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, name := range metricName.FindAllString(string(b), -1) {
			base := name
			if trimmed, ok := strings.CutSuffix(name, "_bucket"); ok && documented[trimmed] == "histogram" {
				base = trimmed
			}
			assert.Contains(t, documented, base, "%s uses %s, which docs/metrics.md does not document", f, name)
		}
	}
}
