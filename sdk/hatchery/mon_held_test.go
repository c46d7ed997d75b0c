package hatchery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/sdk/workerpool"
)

// heldFake is a hatchery holding the VMs of failed spawns.
type heldFake struct {
	*fakeHatchery
	held []HeldWorker
}

func (h heldFake) HeldWorkers(context.Context) []HeldWorker { return h.held }

// TestMonWorkersListsHeldVMs: /mon/workers lists every held VM with its
// failure reason and the end of its hold, after the pool.
func TestMonWorkersListsHeldVMs(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	hs := newHarness(t, testConfig(t), func(o *Options) {
		o.Hatchery = heldFake{fakeHatchery: o.Hatchery.(*fakeHatchery), held: []HeldWorker{{Name: "w-held", Reason: "wait for guest operations ready", Until: until}}}
	})
	rec := httptest.NewRecorder()
	hs.f.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mon/workers", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var workers []workerpool.Worker
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &workers))
	require.Len(t, workers, 1)
	w := workers[0]
	assert.Equal(t, "w-held", w.Name)
	assert.Equal(t, StatusHeld, w.Status)
	assert.Equal(t, workerpool.SourceHeld, w.Source)
	assert.Equal(t, "wait for guest operations ready", w.Reason)
	require.NotNil(t, w.HeldUntil)
	assert.True(t, until.Equal(*w.HeldUntil))
}
