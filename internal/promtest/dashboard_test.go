package promtest

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDashboardImportable: the dashboard asks for its Prometheus data
// source on import (DS_PROMETHEUS) and every panel and query reads it
// through the datasource variable; it has one row per concern; every panel
// has a description and is described in docs/metrics.md under its row.
func TestDashboardImportable(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	doc, err := os.ReadFile(metricsDoc)
	require.NoError(t, err)
	type ds struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	var d struct {
		Inputs []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Datasource  *ds    `json:"datasource"`
			Targets     []struct {
				Expr       string `json:"expr"`
				Datasource *ds    `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.Len(t, d.Inputs, 1)
	assert.Equal(t, "DS_PROMETHEUS", d.Inputs[0].Name)
	assert.Equal(t, "prometheus", d.Inputs[0].PluginID)
	assert.NotEmpty(t, d.UID)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	assert.Equal(t, map[string]string{"datasource": "datasource", "hatchery": "query"}, vars)

	var rows []string
	want := ds{Type: "prometheus", UID: "${datasource}"}
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
			assert.Contains(t, string(doc), "**"+p.Title+"**", "row %q is not described in docs/metrics.md", p.Title)
			continue
		}
		assert.NotEmpty(t, p.Description, p.Title)
		if assert.NotNil(t, p.Datasource, p.Title) {
			assert.Equal(t, want, *p.Datasource, p.Title)
		}
		for _, tg := range p.Targets {
			if assert.NotNil(t, tg.Datasource, p.Title) {
				assert.Equal(t, want, *tg.Datasource, p.Title)
			}
		}
		assert.Contains(t, string(doc), "*"+p.Title+"*", "panel %q is not described in docs/metrics.md", p.Title)
	}
	assert.Equal(t, []string{"Health", "Jobs and spawns", "Per-stage latency", "Capacity and headroom by flavor", "vCenter cost", "Warm pool", "IPs", "Placements"}, rows)
}
