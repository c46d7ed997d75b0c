package spawntiming_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/cdssim"
	"github.com/cds-contrib/hatchery-vsphere/internal/spawntiming"
	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/cdsclient"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// The slow-start notice of a V1 job is a spawn info whose id and
// argument count the API renders into one readable user message, with no
// "%!" mark (the simulator renders it as the API does).
func TestSlowV1StartRendersOnTheAPI(t *testing.T) {
	t.Parallel()
	sim := cdssim.Start(t, cdssim.Options{})
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	c, err := cdsclient.New(cdsclient.Config{
		APIURL: sim.URL(), Token: sim.TokenV1(), ServiceName: "hatch", HTTPURL: "http://127.0.0.1:1",
		PublicKey:      pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)}),
		RequestTimeout: 5 * time.Second, Version: "test",
	})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.SignIn(ctx))
	id := sim.AddJobV1(cdssim.JobV1{})
	_, err = c.QueueJobBook(ctx, id)
	require.NoError(t, err)

	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	queued, booked := now.Add(-30*time.Second), now
	at := now
	clk := spawntiming.NewClock(func() time.Time { return at }, queued, booked)
	tctx := spawntiming.WithClock(ctx, clk)
	at = at.Add(90 * time.Second)
	spawntiming.Mark(tctx, spawntiming.StageClone)
	args := spawn.Arguments{
		WorkerName: "debian12-w1", JobID: strconv.FormatInt(id, 10), Queued: queued, Booked: booked,
		Model: sdk.WorkerStarterWorkerModel{ModelV1: &sdk.Model{Name: "debian12", Group: &sdk.Group{Name: "shared.infra"}, Type: sdk.VSphere}},
	}
	spawntiming.Reporter{
		Hatchery: "hatch", Log: slog.New(slog.DiscardHandler), CDS: c,
		SlowStartThreshold: time.Minute, Now: func() time.Time { return at },
	}.Report(tctx, args, clk)

	st, ok := sim.JobV1(id)
	require.True(t, ok)
	require.Len(t, st.SpawnInfos, 1)
	assert.Equal(t, "This worker debian12-w1 (launched 2m0s after the job was queued, slower than slowStartThreshold (1m0s): queue_to_book=30s clone=1m30s) was created to take this action",
		st.SpawnInfos[0].UserMessage)
	assert.Empty(t, sim.GarbledSpawnInfos())
	assert.Empty(t, sim.UnknownSpawnInfoIDs())
}
