package demo

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

func TestIPClashesOnlyPoweredOn(t *testing.T) {
	t.Parallel()
	vms := []SimVM{
		{Name: "a", PoweredOn: true, IP: "10.0.0.10"},
		{Name: "b", PoweredOn: true, IP: "10.0.0.10"},
		{Name: "c", PoweredOn: false, IP: "10.0.0.11"}, // off: its address is free
		{Name: "d", PoweredOn: true, IP: "10.0.0.11"},
		{Name: "e", PoweredOn: true},
		{Name: "f", PoweredOn: true},
	}
	assert.Equal(t, []string{"10.0.0.10: a, b"}, IPClashes(vms))
	assert.Empty(t, IPClashes(vms[2:]))
}

func TestJobClaimsOfOneHatchery(t *testing.T) {
	t.Parallel()
	ours := func(job string) *inventory.Annotation { return &inventory.Annotation{HatcheryName: "h", JobID: job} }
	vms := []SimVM{
		{Name: "w1", Annotation: ours("42")},
		{Name: "w2", Annotation: ours("42")},
		{Name: "w3", Annotation: ours("43")},
		{Name: "tpl", Template: true, Annotation: ours("43")},
		{Name: "other", Annotation: &inventory.Annotation{HatcheryName: "x", JobID: "43"}},
		{Name: "pool", Annotation: ours("")},
		{Name: "pool2", Annotation: ours("")},
		{Name: "plain"},
	}
	assert.Equal(t, []string{"42: w1, w2"}, JobClaims(vms, "h"))
}

// TestWarnCounterCountsWhatTheLoggerDrops: the quiet check counts every
// record at WARN and above, whatever level the operator's logger keeps
// (here: error only), and passes on only what that logger wants.
func TestWarnCounterCountsWhatTheLoggerDrops(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := newWarnCounter(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	log := slog.New(w).With("instance", 2)
	log.Info("fine")
	log.Warn("first warning", "k", "v")
	log.Error("an error")
	n, first := w.count()
	assert.EqualValues(t, 2, n)
	assert.Equal(t, "WARN first warning", first)
	assert.NotContains(t, buf.String(), "first warning")
	assert.Contains(t, buf.String(), "an error")
	assert.Contains(t, buf.String(), "instance=2")

	quiet := newWarnCounter(slog.DiscardHandler)
	slog.New(quiet).Info("nothing to see")
	n, _ = quiet.count()
	assert.Zero(t, n)
}

func TestRunRefusesUnsupportedInstances(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 3} {
		_, err := Run(context.Background(), Options{Instances: n, Jobs: 1, Once: true})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "1 to 2 instances are supported")
	}
}
