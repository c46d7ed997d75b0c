package ippool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func spPool(t *testing.T, cfg *config.Config) (*Pool, *testutil.Clock) {
	t.Helper()
	p, err := New(cfg)
	require.NoError(t, err)
	c := testutil.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	p.now = c.Now
	return p, c
}

func TestIPPoolReserveSkipsUsedAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vms  []inventory.VM
		want string
	}{
		{name: "empty datacenter", want: "10.0.0.10"},
		{
			name: "powered-off vm holds its annotation ip",
			vms:  []inventory.VM{{Name: "a", PowerState: vctypes.PoweredOff, Annotation: &inventory.Annotation{HatcheryName: "x", IPAddress: "10.0.0.10"}}},
			want: "10.0.0.11",
		},
		{
			name: "foreign vm's guest ip is used",
			vms:  []inventory.VM{{Name: "b", IPAddresses: []string{"10.0.0.10", "10.0.0.11"}}},
			want: "10.0.0.12",
		},
		{
			name: "template annotation ip counts too",
			vms:  []inventory.VM{{Name: "c", Template: true, Annotation: &inventory.Annotation{HatcheryName: "x", IPAddress: "10.0.0.10"}}},
			want: "10.0.0.11",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := spPool(t, &config.Config{IPRange: "10.0.0.10/24"})
			l, err := p.Reserve(context.Background(), inventory.UsedBy(tt.vms), "vm")
			require.NoError(t, err)
			assert.Equal(t, tt.want, l.IP)
			assert.Equal(t, "255.255.255.0", l.SubnetMask, "mask derived from the block")
		})
	}
}

func TestIPPoolExhaustionExpiryAndRelease(t *testing.T) {
	t.Parallel()
	p, clock := spPool(t, &config.Config{IPRange: "10.0.0.1/30"}) // .1 and .2
	ctx := context.Background()
	a, err := p.Reserve(ctx, nil, "vm")
	require.NoError(t, err)
	b, err := p.Reserve(ctx, nil, "vm")
	require.NoError(t, err)
	assert.NotEqual(t, a.IP, b.IP)
	assert.False(t, p.Available(nil))
	_, err = p.Reserve(ctx, nil, "vm")
	require.ErrorIs(t, err, ErrNoIPAvailable)

	p.Release(a.IP, "other")
	assert.False(t, p.Available(nil), "another vm's release keeps the reservation")
	p.Release(a.IP, "vm")
	assert.True(t, p.Available(nil))
	c, err := p.Reserve(ctx, nil, "vm")
	require.NoError(t, err)
	assert.Equal(t, a.IP, c.IP)

	clock.Advance(ReservationTTL - time.Second)
	assert.False(t, p.Available(nil), "reservations still held before expiry")
	clock.Advance(time.Second)
	used, total := p.Counts(nil)
	assert.Equal(t, 0, used, "reservations expire lazily")
	assert.Equal(t, 2, total)
}

func TestIPPoolNoRange(t *testing.T) {
	t.Parallel()
	p, _ := spPool(t, &config.Config{})
	assert.False(t, p.Enabled())
	_, err := p.Reserve(context.Background(), nil, "vm")
	require.Error(t, err)
}

func TestIPPoolBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(&config.Config{IPRange: "10.0.0.1/24", Networks: []config.Network{{IPRange: "10.0.0.5/32"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "networks[0].iprange")
	_, err = New(&config.Config{IPRange: "nonsense"})
	require.Error(t, err)
}

func TestIPPoolConcurrentReservationsAreDistinct(t *testing.T) {
	t.Parallel()
	p, _ := spPool(t, &config.Config{IPRange: "10.1.0.3/26"}) // .3 to .62: 60 addresses
	_, total := p.Counts(nil)
	require.Equal(t, 60, total)
	const n = 50
	var wg sync.WaitGroup
	ips := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			l, err := p.Reserve(context.Background(), nil, "vm")
			ips[i], errs[i] = l.IP, err
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i])
		assert.False(t, seen[ips[i]], "ip %s handed out twice", ips[i])
		seen[ips[i]] = true
	}
	assert.Len(t, seen, n)
	used, _ := p.Counts(nil)
	assert.Equal(t, n, used)
}
