package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateTemplateFolders: each bad entry is reported with its key
// path (index included) and what is wrong; good entries pass. Without
// validateTemplateFolders every case of the first table passes Validate.
func TestValidateTemplateFolders(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name    string
		folders []string
		key     string
		problem string
	}{
		{"empty", []string{"/DC0/vm/templates", " "}, "templateFolders[1]", "empty"},
		{"relative", []string{"templates"}, "templateFolders[0]", "not an inventory path"},
		{"spaces", []string{"/DC0/vm/templates "}, "templateFolders[0]", "spaces"},
		{"empty segment", []string{"/DC0/vm//templates"}, "templateFolders[0]", "empty path segment"},
		{"trailing slash", []string{"/DC0/vm/templates/"}, "templateFolders[0]", "empty path segment"},
		{"other datacenter", []string{"/DC1/vm/templates"}, "templateFolders[0]", `not in the VM folder of datacenter "DC0"`},
		{"not a vm folder", []string{"/DC0/host/templates"}, "templateFolders[0]", `must be "/DC0/vm" or a folder below it`},
		{"vm prefix only", []string{"/DC0/vmware"}, "templateFolders[0]", "not in the VM folder"},
		{"duplicate", []string{"/DC0/vm/a", "/DC0/vm/b", "/DC0/vm/a"}, "templateFolders[2]", "duplicate of templateFolders[0]"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig()
			c.TemplateFolders = tc.folders
			err := c.Validate()
			require.Error(t, err)
			var es Errors
			require.True(t, errors.As(err, &es))
			require.Len(t, es, 1, "one problem expected: %v", err)
			assert.Equal(t, KeyPrefix+"."+tc.key, es[0].Key)
			assert.Contains(t, es[0].Problem, tc.problem)
		})
	}
	good := [][]string{
		nil,
		{"/DC0/vm"},
		{"/DC0/vm/templates", "/DC0/vm/team/golden images"},
	}
	for _, folders := range good {
		c := validConfig()
		c.TemplateFolders = folders
		assert.NoError(t, c.Validate(), "%q", folders)
		assert.Equal(t, len(folders) > 0, c.TemplateFoldersSet())
	}
	// A datacenter given as a path: its VM folder is below that path.
	c := validConfig()
	c.DatacenterString = "/dcs/DC0"
	c.TemplateFolders = []string{"/dcs/DC0/vm/templates"}
	assert.NoError(t, c.Validate())
	c.TemplateFolders = []string{"/DC0/vm/templates"}
	assert.ErrorContains(t, c.Validate(), `must be "/dcs/DC0/vm" or a folder below it`)
}
