package vcenter_test

import (
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/vcsimtest"
)

// TestConcurrentRequestsReuseConnections: a burst of spawns sends many
// requests at once (task polls, readiness polls, listings). Once the
// client has opened enough connections for the burst, later bursts reuse
// them instead of opening a connection (and a TLS handshake) per request
// beyond Go's default of two idle connections per host.
func TestConcurrentRequestsReuseConnections(t *testing.T) {
	t.Parallel()
	env := vcsimtest.Start(t, vcsimtest.Options{})
	c := env.NewClient(nil)
	const parallel, rounds = 24, 5

	var opened, reused atomic.Int64
	ctx := httptrace.WithClientTrace(testCtx(t), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused.Add(1)
			} else {
				opened.Add(1)
			}
		},
	})
	// The view the listings read through exists before the rounds: they
	// all send the same one request.
	_, err := c.ListVirtualMachines(ctx)
	require.NoError(t, err)
	for round := 0; round < rounds; round++ {
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, parallel)
		for i := 0; i < parallel; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				_, errs[i] = c.ListVirtualMachines(ctx)
			}(i)
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	t.Logf("connections: %d opened, %d reused", opened.Load(), reused.Load())
	require.GreaterOrEqual(t, opened.Load()+reused.Load(), int64(parallel*rounds), "every request got a connection")
	// At most one connection per concurrent request is ever opened: the
	// rounds after the first find them idle.
	assert.LessOrEqual(t, opened.Load(), int64(parallel), "connections opened for %d rounds of %d concurrent requests", rounds, parallel)
}
