package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseIPRange(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		in      string
		first   string
		last    string
		count   int
		wantErr string
	}{
		{name: "network address skips network and broadcast", in: "192.168.1.0/30", first: "192.168.1.1", last: "192.168.1.2", count: 2},
		{name: "start inside the block", in: "10.0.0.250/24", first: "10.0.0.250", last: "10.0.0.254", count: 5},
		{name: "single address", in: "10.1.1.1/32", first: "10.1.1.1", last: "10.1.1.1", count: 1},
		{name: "point to point", in: "10.1.1.0/31", first: "10.1.1.0", last: "10.1.1.1", count: 2},
		{name: "two blocks keep order", in: "10.0.1.1/32, 10.0.0.1/32", first: "10.0.1.1", last: "10.0.0.1", count: 2},
		{name: "garbage", in: "10.0.0.1-10.0.0.5", wantErr: "not an IPv4 CIDR"},
		{name: "empty element", in: "10.0.0.1/32,", wantErr: "empty element"},
		{name: "ipv6", in: "fe80::1/64", wantErr: "not IPv4"},
		{name: "overlap", in: "10.0.0.1/32,10.0.0.0/30", wantErr: "listed twice"},
		{name: "too big", in: "10.0.0.0/8", wantErr: "more than"},
		{name: "broadcast only", in: "10.0.0.3/30", wantErr: "no usable host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseIPRange(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, tc.count)
			require.Equal(t, tc.first, got[0].String())
			require.Equal(t, tc.last, got[len(got)-1].String())
		})
	}
}
