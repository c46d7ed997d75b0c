package quarantine_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/quarantine"
)

// clock is a fake clock advanced by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const ms = time.Millisecond

var testPolicy = quarantine.Policy{Threshold: 3, BackoffBase: 100 * ms, BackoffMax: 350 * ms}

// step is one event of a table case: wait, then a spawn on key "t" that
// ends ok, or fails with cause; want* are checked after it.
type step struct {
	wait    time.Duration
	refused bool // Begin refuses (nothing else happens)
	probe   bool // Begin says probe
	ok      bool
	cause   quarantine.Cause
	want    quarantine.Transition
	state   string        // "": not checked
	until   time.Duration // from the clock's start; 0: not checked
}

func TestBook(t *testing.T) {
	t.Parallel()
	tpl, other := quarantine.CauseTemplate, quarantine.CauseOther
	cases := []struct {
		name  string
		steps []step
	}{
		{"threshold failures quarantine", []step{
			{cause: tpl, state: "healthy"},
			{cause: tpl, state: "healthy"},
			{cause: tpl, want: quarantine.Entered, state: "quarantined", until: 100 * ms},
			{refused: true, state: "quarantined"},
			{wait: 99 * ms, refused: true, state: "quarantined"},
		}},
		{"a success resets the count", []step{
			{cause: tpl}, {cause: tpl}, {ok: true},
			{cause: tpl}, {cause: tpl, state: "healthy"},
			{cause: tpl, want: quarantine.Entered, state: "quarantined"},
		}},
		{"other causes neither count nor reset", []step{
			{cause: tpl}, {cause: other}, {cause: other}, {cause: tpl, state: "healthy"},
			{cause: other, state: "healthy"},
			{cause: tpl, want: quarantine.Entered, state: "quarantined"},
		}},
		{"probe after the period lifts on success", []step{
			{cause: tpl}, {cause: tpl}, {cause: tpl, want: quarantine.Entered},
			{wait: 100 * ms, probe: true, ok: true, want: quarantine.Lifted, state: "healthy"},
			{cause: tpl, state: "healthy"}, // the count starts again
		}},
		{"failed probes double the period up to the cap", []step{
			{cause: tpl}, {cause: tpl}, {cause: tpl, want: quarantine.Entered, until: 100 * ms},
			{wait: 100 * ms, probe: true, cause: tpl, want: quarantine.Renewed, state: "quarantined", until: 300 * ms},
			{wait: 199 * ms, refused: true},
			{wait: 1 * ms, probe: true, cause: tpl, want: quarantine.Renewed, until: 300*ms + 350*ms}, // 400 capped at 350
			{wait: 350 * ms, probe: true, cause: tpl, want: quarantine.Renewed, until: 650*ms + 350*ms},
		}},
		{"a probe failing elsewhere gives the slot back, same period", []step{
			{cause: tpl}, {cause: tpl}, {cause: tpl, want: quarantine.Entered},
			{wait: 100 * ms, probe: true, cause: other, state: "quarantined", until: 100 * ms},
			{probe: true, ok: true, want: quarantine.Lifted, state: "healthy"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{t: time.Unix(0, 0)}
			start := c.now()
			b := quarantine.New(testPolicy, c.now)
			for i, s := range tc.steps {
				c.advance(s.wait)
				chk := b.Check("t")
				a, v := b.Begin("t")
				require.Equal(t, chk.Allowed, v.Allowed, "step %d: Check and Begin agree", i)
				if s.refused {
					require.Nil(t, a, "step %d: refused", i)
					assert.False(t, v.Allowed, "step %d", i)
					continue
				}
				require.NotNil(t, a, "step %d: allowed, got %+v", i, v.Entry)
				assert.Equal(t, s.probe, a.Probe(), "step %d: probe", i)
				tr, e := a.End(s.ok, s.cause, "guest never ready")
				assert.Equal(t, s.want, tr, "step %d: transition", i)
				if s.state != "" {
					assert.Equal(t, s.state, e.State.String(), "step %d: state", i)
				}
				if s.until != 0 {
					assert.Equal(t, s.until, e.Until.Sub(start), "step %d: until", i)
				}
			}
		})
	}
}

// TestBookOtherKeysUnaffected: a quarantined key refuses nothing of another.
func TestBookOtherKeysUnaffected(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := quarantine.New(quarantine.Policy{Threshold: 1, BackoffBase: time.Hour, BackoffMax: time.Hour}, c.now)
	a, _ := b.Begin("broken")
	tr, _ := a.End(false, quarantine.CauseTemplate, "launch failed")
	require.Equal(t, quarantine.Entered, tr)
	assert.False(t, b.Check("broken").Allowed)
	assert.True(t, b.Check("fine").Allowed)
	q := b.Quarantined()
	require.Len(t, q, 1)
	assert.Equal(t, "broken", q[0].Key)
	assert.Equal(t, "launch failed", q[0].Reason)
}

// TestBookEndOnce: a second End changes nothing.
func TestBookEndOnce(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := quarantine.New(quarantine.Policy{Threshold: 2, BackoffBase: time.Second, BackoffMax: time.Second}, c.now)
	a, _ := b.Begin("t")
	a.End(false, quarantine.CauseTemplate, "x")
	tr, _ := a.End(false, quarantine.CauseTemplate, "x")
	assert.Equal(t, quarantine.Unchanged, tr)
	assert.True(t, b.Check("t").Allowed, "one failure counted, not two")
}

// TestBookOneProbeAtATime: once the period is over, many spawns race for
// the key; exactly one becomes the probe, the others are refused until it
// ends.
func TestBookOneProbeAtATime(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := quarantine.New(quarantine.Policy{Threshold: 1, BackoffBase: 10 * ms, BackoffMax: 10 * ms}, c.now)
	a, _ := b.Begin("t")
	a.End(false, quarantine.CauseTemplate, "x")
	c.advance(10 * ms)

	const racers = 32
	var probes atomic.Int32
	var wg sync.WaitGroup
	got := make(chan *quarantine.Attempt, racers)
	start := make(chan struct{})
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if a, v := b.Begin("t"); a != nil {
				require.True(t, v.Probe)
				probes.Add(1)
				got <- a
			}
		}()
	}
	close(start)
	wg.Wait()
	close(got)
	require.EqualValues(t, 1, probes.Load(), "exactly one probe")
	p := <-got
	assert.Equal(t, quarantine.Probing, b.Quarantined()[0].State)
	tr, _ := p.End(true, quarantine.CauseOther, "")
	assert.Equal(t, quarantine.Lifted, tr)
	assert.Empty(t, b.Quarantined())
}

// TestBookHourBound: a key broken for a whole (simulated) hour, with a
// spawn asked for every minute, is used N times then once per back-off
// period: far fewer than one per job. With the policy here (N=3, 2 min
// doubling to 30 min: probes 2, 6, 14 and 30 min after the quarantine)
// that is 3 + 4 = 7 spawns instead of 60.
func TestBookHourBound(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	p := quarantine.Policy{Threshold: 3, BackoffBase: 2 * time.Minute, BackoffMax: 30 * time.Minute}
	b := quarantine.New(p, c.now)
	used := 0
	for minute := 0; minute < 60; minute++ {
		if a, _ := b.Begin("broken"); a != nil {
			used++
			a.End(false, quarantine.CauseTemplate, "guest never ready")
		}
		c.advance(time.Minute)
	}
	assert.Equal(t, HourBound(p, 60*time.Minute), used)
	assert.Equal(t, 7, used)
}

// HourBound is the documented bound on the spawns of a broken key asked
// for continuously over d: Threshold, plus one probe at the end of each
// period (the periods Backoff(1), Backoff(2)... back to back).
func HourBound(p quarantine.Policy, d time.Duration) int {
	n := p.Threshold
	var t time.Duration
	for k := 1; ; k++ {
		t += p.Backoff(k)
		if t >= d {
			return n
		}
		n++
	}
}

// TestBookSetPolicy: a policy set while failures are counted (a reload)
// judges the next failure: with the threshold lowered from 3 to 2, the
// second failure quarantines the key, for the new policy's back-off.
// Without SetPolicy the second failure would leave it healthy.
func TestBookSetPolicy(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	b := quarantine.New(testPolicy, c.now)
	fail := func() quarantine.Transition {
		a, v := b.Begin("t")
		require.True(t, v.Allowed)
		tr, _ := a.End(false, quarantine.CauseTemplate, "guest never ready")
		return tr
	}
	assert.Equal(t, quarantine.Unchanged, fail())
	b.SetPolicy(quarantine.Policy{Threshold: 2, BackoffBase: 200 * ms, BackoffMax: 400 * ms})
	assert.Equal(t, 2, b.Policy().Threshold)
	assert.Equal(t, quarantine.Entered, fail())
	v := b.Check("t")
	assert.False(t, v.Allowed)
	assert.Equal(t, c.now().Add(200*ms), v.Entry.Until, "the new policy's back-off")
}

// TestBookLift: a lift makes a quarantined key usable at once, counts its
// failures from zero again, and says false for a key not quarantined.
func TestBookLift(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := quarantine.New(testPolicy, c.now)
	_, ok := b.Lift("t")
	assert.False(t, ok, "nothing to lift")
	for range testPolicy.Threshold {
		a, _ := b.Begin("t")
		require.NotNil(t, a)
		a.End(false, quarantine.CauseTemplate, "guest never ready")
	}
	require.False(t, b.Check("t").Allowed, "quarantined")
	e, ok := b.Lift("t")
	require.True(t, ok)
	assert.Equal(t, "t", e.Key)
	assert.Equal(t, testPolicy.Threshold, e.Failures)
	v := b.Check("t")
	assert.True(t, v.Allowed)
	assert.False(t, v.Probe, "a plain spawn, not a probe")
	assert.Empty(t, b.Quarantined())
	a, _ := b.Begin("t")
	tr, after := a.End(false, quarantine.CauseTemplate, "again")
	assert.Equal(t, quarantine.Unchanged, tr)
	assert.Equal(t, 1, after.Failures, "failures count from zero after a lift")
	_, ok = b.Lift("t")
	assert.False(t, ok, "a key with failures below the threshold is not quarantined")
}
