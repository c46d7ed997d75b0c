package vcenter

import (
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/testutil"
)

// TestNoteOneLineEachWay: an outage logs `vcenter unreachable` once and
// `vcenter reachable again` once, whatever order the calls in flight at
// either moment end in: an answer to a call sent before the outage began,
// noted after a failure (the connections broke just after it was read),
// does not end the outage, and a failure of a call sent before vCenter
// answered again does not start another. A re-login during the outage is
// DEBUG, and the `reachable again` line says session=renewed.
func TestNoteOneLineEachWay(t *testing.T) {
	var logs testutil.SyncBuffer
	c := New(Config{Endpoint: "vc.example", User: "u", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	noAnswer := &url.Error{Op: "Post", URL: "https://vc.example/sdk", Err: io.EOF}
	unreachable := func() bool { return c.Status().Unreachable != nil }

	before := time.Now()
	c.note(noAnswer, time.Now())
	require.True(t, unreachable())
	c.note(nil, before) // read before the break, noted after the failure
	assert.True(t, unreachable(), "an answer to a call sent before the outage does not end it")
	c.note(noAnswer, time.Now())
	assert.True(t, c.reloginQuiet(), "a re-login while vCenter is unreachable is part of the outage")

	c.note(nil, time.Now()) // sent during the outage, answered: vCenter is back
	require.False(t, unreachable())
	c.note(noAnswer, before) // sent before vCenter came back, failed late
	assert.False(t, unreachable(), "a failure of a call sent before vCenter answered again starts no outage")
	assert.True(t, c.reloginQuiet(), "a re-login just after the outage is part of it")

	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `msg="vcenter unreachable"`), out)
	assert.Equal(t, 1, strings.Count(out, `msg="vcenter reachable again"`), out)
	assert.Contains(t, out, "session=renewed")

	// A later outage is told again, and without a re-login its end does
	// not say session=renewed.
	c.note(noAnswer, time.Now())
	c.note(nil, time.Now())
	out = logs.String()
	assert.Equal(t, 2, strings.Count(out, `msg="vcenter unreachable"`), out)
	assert.Equal(t, 1, strings.Count(out, "session=renewed"), out)
}

// TestReloginQuietOutsideAnOutage: a session vCenter ended while it
// answers (expired, terminated) is not part of an outage: its re-login is
// the one INFO line (reloginRoundTripper.relogin).
func TestReloginQuietOutsideAnOutage(t *testing.T) {
	c := New(Config{Endpoint: "vc.example", User: "u", Logger: slog.New(slog.DiscardHandler)})
	assert.False(t, c.reloginQuiet())
	c.note(nil, time.Now())
	assert.False(t, c.reloginQuiet(), "an answer with no outage before it")
}
