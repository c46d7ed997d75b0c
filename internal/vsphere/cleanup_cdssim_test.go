package vsphere

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
)

// TestKillAwolServersAgainstTheAPIView runs the awol cleanup with the real
// CDS client against the simulator, which lists and ends workers and
// keeps bookings as the API does:
//   - a V2 worker that signed in, ran its job and signed out between two
//     passes (gone from the list, VM still powered on past the
//     registration ttl): deleted as finished, its job (Success) not
//     released;
//   - a V1 worker that ended, VM powered off by its post-command, the API
//     still listing it (Disabled): deleted at once;
//   - a V1 job whose booking the API dropped, worker never started:
//     deleted, no release sent (it would answer 400 "Job already
//     released");
//   - a V1 job still booked by us, worker never started: deleted and
//     released.
func TestKillAwolServersAgainstTheAPIView(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testutil.NewClock(time.Now())
	sim := cdssim.Start(t, cdssim.Options{Now: clock.Now})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pub := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)})
	cds, err := cdsclient.New(cdsclient.Config{
		APIURL: sim.URL(), Token: sim.TokenV1(), TokenV2: sim.TokenV2(), ServiceName: warmHatcheryName,
		PublicKey: pub, RequestTimeout: 5 * time.Second,
	})
	require.NoError(t, err)
	require.NoError(t, cds.SignIn(ctx))

	// A booking that lapses: booked first, the clock moved past its
	// lifetime, then the other jobs booked.
	lapsed := sim.AddJobV1(cdssim.JobV1{})
	_, err = cds.QueueJobBook(ctx, lapsed)
	require.NoError(t, err)
	clock.Advance(cdssim.DefaultBookingTTL)

	quick := sim.AddJobV2(cdssim.JobV2{Model: sdk.V2WorkerModel{Name: "debian"}})
	require.NoError(t, cds.V2QueueJobTake(ctx, sim.Region(), quick))
	require.NotEmpty(t, sim.RegisterWorker("w-v2-quick", quick))
	require.True(t, sim.FinishWorker("w-v2-quick", ""))

	done := sim.AddJobV1(cdssim.JobV1{})
	_, err = cds.QueueJobBook(ctx, done)
	require.NoError(t, err)
	require.NotEmpty(t, sim.RegisterWorker("w-v1-done", strconv.FormatInt(done, 10)))
	require.True(t, sim.FinishWorker("w-v1-done", ""))

	stuck := sim.AddJobV1(cdssim.JobV1{})
	_, err = cds.QueueJobBook(ctx, stuck)
	require.NoError(t, err)

	job := func(id string) vmOpt { return wAnnot(func(a *inventory.Annotation) { a.JobID = id }) }
	vms := []inventory.VM{
		warmVM("w-v2-quick", wStarted(11*time.Minute), job(quick)),
		warmVM("w-v1-done", wOff, wStarted(2*time.Minute), job(strconv.FormatInt(done, 10))),
		warmVM("w-v1-lapsed", wCreated(time.Hour), job(strconv.FormatInt(lapsed, 10))),
		warmVM("w-v1-stuck", wCreated(time.Hour), job(strconv.FormatInt(stuck, 10))),
	}
	e := newWarmEnv(t, warmConfig(), vms, nil)
	e.h.cds = cds
	for _, v := range vms {
		e.expectDelete(v)
	}

	e.h.killAwolServers(ctx)

	st2, _ := sim.JobV2(quick)
	assert.Equal(t, sdk.StatusSuccess, st2.Status, "the finished V2 job is not queued again")
	releases := func(id int64) int {
		return sim.CountCalls("DELETE", "/queue/workflows/"+strconv.FormatInt(id, 10)+"/book")
	}
	assert.Zero(t, sim.CountCalls("DELETE", "/v2/queue/"+sim.Region()+"/job/"+quick+"/hatchery/take"))
	assert.Zero(t, releases(done))
	assert.Zero(t, releases(lapsed), "a booking the API dropped is not ours to release")
	assert.Equal(t, 1, releases(stuck))
	st, _ := sim.JobV1(stuck)
	assert.Empty(t, st.BookedBy, "released: back in the queue")
}
