package vim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vmware/govmomi/vim25/types"
)

func TestPickIP(t *testing.T) {
	g := &types.GuestInfo{
		IpAddress: "172.17.0.2",
		Net: []types.GuestNicInfo{
			{IpAddress: []string{"fe80::1", "169.254.1.1", "10.0.0.5"}},
		},
	}
	assert.Equal(t, "10.0.0.5", pickIP(g, ""), "guest.net first, link-local skipped")
	assert.Equal(t, "172.17.0.2", pickIP(g, "172.17.0.2"))
	assert.Equal(t, "", pickIP(g, "10.0.0.6"))
	assert.Equal(t, "", pickIP(nil, ""))
	assert.Equal(t, "", pickIP(&types.GuestInfo{}, ""))
}
