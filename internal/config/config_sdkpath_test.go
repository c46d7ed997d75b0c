package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/vim25"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
)

// TestSDKPathIsGovmomis: the configuration's SDK path is the one govmomi
// connects to, which the configuration no longer imports.
func TestSDKPathIsGovmomis(t *testing.T) {
	assert.Equal(t, vim25.Path, config.SDKPath)
}
