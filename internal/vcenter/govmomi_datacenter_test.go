package vcenter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcenter"
	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestWrongDatacenterIsNamed: a datacenterString that does not exist once
// read as "vcenter not reachable". The login works; the error says so,
// names the missing datacenter and lists the existing ones.
func TestWrongDatacenterIsNamed(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{NoTemplates: true})
	_, err := env.TryClient(func(c *vcenter.Config) { c.Datacenter = "DC-typo" })
	require.Error(t, err)
	var dnf *vcenter.DatacenterNotFoundError
	require.True(t, errors.As(err, &dnf), "%v", err)
	assert.Equal(t, "DC-typo", dnf.Name)
	assert.Equal(t, []string{vcsimtest.DatacenterName}, dnf.Existing)
	assert.Contains(t, err.Error(), `find datacenter "DC-typo" (datacenterString): logged in to vcenter `)
	assert.Contains(t, err.Error(), `, but no such datacenter; datacenters: `+vcsimtest.DatacenterName)
	assert.NotContains(t, err.Error(), env.Password)
}
