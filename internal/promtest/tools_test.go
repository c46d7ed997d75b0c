package promtest

import (
	"os"
	"os/exec"
	"testing"
)

// Paths of the shipped files, from this package's directory.
const (
	rulesFile     = "../../configs/prometheus/hatchery-vsphere.rules.yml"
	rulesTestFile = "../../configs/prometheus/hatchery-vsphere.rules_test.yml"
	scrapeFile    = "../../configs/prometheus/prometheus-scrape.yml"
	dashboardFile = "../../configs/grafana/hatchery-vsphere-dashboard.json"
	metricsDoc    = "../../docs/metrics.md"
	troubleDoc    = "../../docs/troubleshooting.md"
)

// tool returns the path of a Prometheus binary (prometheus, promtool; Debian
// package prometheus, installed by .ci/run). Missing, the test fails in CI
// (CI=true) and is skipped elsewhere.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found (apt-get install prometheus): %v", name, err)
	}
	t.Skipf("%s not found (apt-get install prometheus); required when CI=true", name)
	return ""
}
