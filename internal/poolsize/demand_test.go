package poolsize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemandLearnsByTimeOfWeek(t *testing.T) {
	t.Parallel()
	var d Demand
	tue10 := monday.Add(34 * time.Hour)
	for i := range 6 {
		d.Arrive(tue10.Add(time.Duration(i) * time.Minute))
	}
	d.Observe(tue10.Add(time.Hour))
	assert.InDelta(t, 6, d.Expected(tue10, tue10.Add(BucketWidth)), 1e-9)
	assert.InDelta(t, 3, d.Expected(tue10.Add(BucketWidth/2), tue10.Add(BucketWidth+BucketWidth/2)), 1e-9, "pro rata")
	assert.Zero(t, d.Expected(tue10.Add(-time.Hour), tue10), "the hour before learnt 0")
	next := tue10.Add(7 * 24 * time.Hour)
	assert.InDelta(t, 6, d.Expected(next, next.Add(BucketWidth)), 1e-9, "the same time next week")

	// A week with none moves the bucket by the newest week's weight.
	d.Observe(next.Add(time.Hour))
	assert.InDelta(t, 6*(1-DefaultLearnWeight), d.Expected(next, next.Add(BucketWidth)), 1e-9)
}

func TestDemandCountsOnlyTheLastQuarterHourAsRecent(t *testing.T) {
	t.Parallel()
	var d Demand
	d.Arrive(monday)
	d.Arrive(monday.Add(10 * time.Minute))
	d.Observe(monday.Add(14 * time.Minute))
	assert.Equal(t, 2, d.Recent())
	d.Observe(monday.Add(16 * time.Minute))
	assert.Equal(t, 1, d.Recent())
	assert.Equal(t, monday.Add(10*time.Minute), d.LastArrival())
}

func TestDemandLongSilenceForgetsOnce(t *testing.T) {
	t.Parallel()
	var d Demand
	d.Arrive(monday.Add(10 * time.Hour))
	d.Observe(monday.Add(10*time.Hour + 20*time.Minute))
	require.InDelta(t, 1, d.Expected(monday.Add(10*time.Hour), monday.Add(10*time.Hour+BucketWidth)), 1e-9)
	// Six weeks later: the bucket learnt one empty week, not six.
	later := monday.Add(6*7*24*time.Hour + 11*time.Hour)
	d.Observe(later)
	at := later.Add(-time.Hour)
	assert.InDelta(t, 1-DefaultLearnWeight, d.Expected(at, at.Add(BucketWidth)), 1e-9)
}

func TestDemandEncodingRoundTrip(t *testing.T) {
	t.Parallel()
	var d Demand
	learn := &Sizer{}
	learnWeeks(learn, monday, 1, dailyPeak)
	d = learn.Demand
	text, err := d.MarshalText()
	require.NoError(t, err)
	assert.Less(t, len(text), 2000, "fits a record in vCenter")
	var back Demand
	require.NoError(t, back.UnmarshalText(text))
	for h := 0; h < 24*7; h++ {
		at := monday.Add(time.Duration(h) * time.Hour)
		assert.InDelta(t, d.Expected(at, at.Add(time.Hour)), back.Expected(at, at.Add(time.Hour)), 0.02, "hour %d", h)
	}
	assert.Equal(t, d.learnt, back.learnt)
	assert.Error(t, back.UnmarshalText([]byte("AAAA")))
	assert.Error(t, back.UnmarshalText([]byte("not base64!")))
}

// TestDemandMergeKeepsWhatWasLearnt: a merge fills the buckets not learnt
// yet from the other demand and keeps those learnt, even at 0.
func TestDemandMergeKeepsWhatWasLearnt(t *testing.T) {
	t.Parallel()
	var stored Demand
	for i := range WeekBuckets {
		stored.rate[i], stored.learnt[i] = 3, true
	}
	var d Demand
	d.Arrive(monday)
	d.Arrive(monday.Add(time.Minute))
	d.Observe(monday.Add(2 * BucketWidth)) // learns 2 then 0
	d.Merge(&stored)
	assert.InDelta(t, 2, d.Expected(monday, monday.Add(BucketWidth)), 1e-9, "learnt here: kept")
	assert.InDelta(t, 0, d.Expected(monday.Add(BucketWidth), monday.Add(2*BucketWidth)), 1e-9, "learnt empty here: kept")
	assert.InDelta(t, 3, d.Expected(monday.Add(3*BucketWidth), monday.Add(4*BucketWidth)), 1e-9, "not learnt here: the stored")
	for i := range WeekBuckets {
		assert.True(t, d.learnt[i], "bucket %d", i)
	}
}
