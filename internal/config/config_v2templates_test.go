package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without v2TemplateNames any template may be named, as before the key
// (an old configuration keeps working); with it, only the names a
// pattern matches whole.
func TestV2TemplateAllowed(t *testing.T) {
	t.Parallel()
	c := validConfig()
	for _, name := range []string{"debian12", "team-b-secret", ""} {
		assert.True(t, c.V2TemplateAllowed(name), "unset: %q allowed", name)
	}

	c.V2TemplateNames = []string{"ci-*", " debian1[0-9] "}
	require.NoError(t, c.Validate())
	for name, want := range map[string]bool{
		"ci-debian12":   true,
		"debian12":      true,
		"debian1":       false, // the class needs one more character
		"team-b-secret": false,
		"xci-debian12":  false, // the whole name is matched, not a part
		"ci-/x":         false, // * does not cross a /
		"":              false,
	} {
		assert.Equal(t, want, c.V2TemplateAllowed(name), "%q", name)
	}
	assert.Equal(t, `"ci-*", "debian1[0-9]"`, c.V2TemplatePatterns())
}

// An old configuration file, without the key, loads with it empty.
func TestV2TemplateNamesLoads(t *testing.T) {
	t.Parallel()
	old, err := LoadFrom(strings.NewReader(string(MinimalConfig())), secretEnv())
	require.NoError(t, err)
	assert.Empty(t, old.V2TemplateNames)

	doc := string(MinimalConfig()) + "\n"
	doc = strings.Replace(doc, "[hatchery.vsphere]\n", "[hatchery.vsphere]\n  v2TemplateNames = [\"ci-*\", \"debian12\"]\n", 1)
	c, err := LoadFrom(strings.NewReader(doc), secretEnv())
	require.NoError(t, err)
	assert.Equal(t, []string{"ci-*", "debian12"}, c.V2TemplateNames)
}

// Every bad pattern is reported with its key path, and so is a V2 warm
// pool on a template the patterns do not allow (no job could claim it).
func TestValidateV2TemplateNames(t *testing.T) {
	t.Parallel()
	c := validConfig()
	c.V2TemplateNames = []string{"ci-*", " ", "deb[12"}
	c.WorkerProvisioning = []WorkerProvisioning{{ModelVMWare: "team-b", Number: 1}}
	err := c.Validate()
	require.Error(t, err)
	var ce Errors
	require.True(t, errors.As(err, &ce))
	got := map[string]string{}
	for _, fe := range ce {
		got[strings.TrimPrefix(fe.Key, KeyPrefix+".")] = fe.Problem
	}
	assert.Contains(t, got["v2TemplateNames[1]"], "empty pattern")
	assert.Contains(t, got["v2TemplateNames[2]"], `"deb[12" is not a pattern`)
	assert.NotContains(t, got, "v2TemplateNames[0]")
	assert.NotContains(t, got, "workerProvisioning[0].modelVMWare", "not judged against malformed patterns")

	c.V2TemplateNames = []string{"ci-*"}
	err = c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), KeyPrefix+`.workerProvisioning[0].modelVMWare: "team-b" matches no pattern of v2TemplateNames ("ci-*")`)

	c.WorkerProvisioning[0].ModelVMWare = "ci-debian12"
	require.NoError(t, c.Validate())
}
