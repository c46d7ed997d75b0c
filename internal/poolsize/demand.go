package poolsize

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// BucketWidth is the resolution of the learnt demand: a quarter hour.
const BucketWidth = 15 * time.Minute

// WeekBuckets is the number of buckets in a week.
const WeekBuckets = int(7 * 24 * time.Hour / BucketWidth)

// DefaultLearnWeight is the weight of the newest week in a bucket's
// learnt rate (an exponential average across weeks): a holiday week moves
// the next week's Monday by a third, not all the way.
const DefaultLearnWeight = 1.0 / 3

// Demand is the demand one pool sees: arrivals per quarter hour of the
// week, learnt across weeks, and the arrivals of the last quarter hour.
// Its zero value is ready (UTC, DefaultLearnWeight). It is not safe for
// concurrent use; Sizer serialises its calls.
type Demand struct {
	// Loc is the time zone the week is read in (nil: UTC); schedules are
	// read in the same zone.
	Loc *time.Location
	// Weight is the newest week's weight in a bucket's rate (0:
	// DefaultLearnWeight).
	Weight float64

	rate    [WeekBuckets]float64 // learnt arrivals per bucket
	learnt  [WeekBuckets]bool    // the bucket has been seen once
	cur     int64                // absolute bucket being counted (0: none yet)
	count   float64              // arrivals counted in cur
	recent  []time.Time          // arrivals of the last BucketWidth
	lastArr time.Time
}

func (d *Demand) loc() *time.Location {
	if d.Loc == nil {
		return time.UTC
	}
	return d.Loc
}

func (d *Demand) weight() float64 {
	if d.Weight <= 0 || d.Weight > 1 {
		return DefaultLearnWeight
	}
	return d.Weight
}

// weekBucket is the bucket of the week t falls in (Sunday 00:00 is 0).
func (d *Demand) weekBucket(t time.Time) int {
	t = t.In(d.loc())
	return (int(t.Weekday())*24*60 + t.Hour()*60 + t.Minute()) / int(BucketWidth/time.Minute)
}

// absBucket numbers the quarter hours since the Unix epoch.
func absBucket(t time.Time) int64 { return t.Unix() / int64(BucketWidth/time.Second) }

// Arrive counts one job of the pool arriving in the queue at t. Times go
// forward: an arrival older than the bucket being counted is counted in
// it.
func (d *Demand) Arrive(t time.Time) {
	d.advance(t)
	d.count++
	d.recent = append(d.recent, t)
	if t.After(d.lastArr) {
		d.lastArr = t
	}
}

// LastArrival is the time of the last arrival (zero: none).
func (d *Demand) LastArrival() time.Time { return d.lastArr }

// advance folds every bucket that ended before t into the learnt rates
// (a bucket without arrivals learns 0) and drops the recent arrivals
// older than BucketWidth.
func (d *Demand) advance(t time.Time) {
	abs := absBucket(t)
	if d.cur == 0 {
		d.cur = abs
	}
	if abs-d.cur > int64(WeekBuckets) {
		// Silent for more than a week (a stop): the week before t is
		// learnt as empty once, the rest would change nothing more.
		d.fold(d.cur, d.count)
		d.count = 0
		d.cur = abs - int64(WeekBuckets)
	}
	for d.cur < abs {
		d.fold(d.cur, d.count)
		d.count = 0
		d.cur++
	}
	cut := t.Add(-BucketWidth)
	i := 0
	for i < len(d.recent) && !d.recent[i].After(cut) {
		i++
	}
	d.recent = d.recent[i:]
}

// fold learns c arrivals in the absolute bucket abs.
func (d *Demand) fold(abs int64, c float64) {
	b := d.weekBucket(time.Unix(abs*int64(BucketWidth/time.Second), 0))
	if !d.learnt[b] {
		d.rate[b], d.learnt[b] = c, true
		return
	}
	w := d.weight()
	d.rate[b] = w*c + (1-w)*d.rate[b]
}

// Observe moves the demand's clock to now without an arrival (the pool's
// pass): the buckets that ended learn what they counted.
func (d *Demand) Observe(now time.Time) { d.advance(now) }

// Expected returns the arrivals learnt for [from, to): the learnt rates of
// the buckets the interval covers, pro rata.
func (d *Demand) Expected(from, to time.Time) float64 {
	var sum float64
	for t := from; t.Before(to); {
		start := t.Truncate(BucketWidth)
		end := start.Add(BucketWidth)
		if end.After(to) {
			end = to
		}
		sum += d.rate[d.weekBucket(t)] * float64(end.Sub(t)) / float64(BucketWidth)
		t = end
	}
	return sum
}

// Recent returns the arrivals of the last BucketWidth before now (as last
// observed).
func (d *Demand) Recent() int { return len(d.recent) }

// encodingVersion starts an encoded demand (MarshalText).
const encodingVersion = 1

// MarshalText encodes the learnt rates (hundredths of an arrival per
// bucket, at most 655.35) in base64: about 1.8 KB, what a record in
// vCenter holds (docs/warm-pools.md, "After a restart").
func (d *Demand) MarshalText() ([]byte, error) {
	buf := make([]byte, 1+2*WeekBuckets+WeekBuckets/8+1)
	buf[0] = encodingVersion
	for i, r := range d.rate {
		v := math.Round(r * 100)
		if v > math.MaxUint16 {
			v = math.MaxUint16
		}
		binary.BigEndian.PutUint16(buf[1+2*i:], uint16(v))
		if d.learnt[i] {
			buf[1+2*WeekBuckets+i/8] |= 1 << (i % 8)
		}
	}
	out := make([]byte, base64.RawStdEncoding.EncodedLen(len(buf)))
	base64.RawStdEncoding.Encode(out, buf)
	return out, nil
}

// UnmarshalText restores the learnt rates MarshalText encoded; the
// bucket being counted and the recent arrivals start empty.
func (d *Demand) UnmarshalText(text []byte) error {
	buf := make([]byte, base64.RawStdEncoding.DecodedLen(len(text)))
	n, err := base64.RawStdEncoding.Decode(buf, text)
	if err != nil {
		return fmt.Errorf("decode learnt demand: %w", err)
	}
	buf = buf[:n]
	if len(buf) != 1+2*WeekBuckets+WeekBuckets/8+1 || buf[0] != encodingVersion {
		return errors.New("decode learnt demand: unknown encoding")
	}
	for i := range d.rate {
		d.rate[i] = float64(binary.BigEndian.Uint16(buf[1+2*i:])) / 100
		d.learnt[i] = buf[1+2*WeekBuckets+i/8]&(1<<(i%8)) != 0
	}
	d.cur, d.count, d.recent = 0, 0, nil
	return nil
}

// Merge takes, for every bucket d has not learnt yet, what o learnt: a
// restarted instance that has counted a few quarter hours keeps them and
// takes the rest of the week from the record (docs/warm-pools.md, "After
// a restart"). A bucket d learnt is d's, the fresher reading.
func (d *Demand) Merge(o *Demand) {
	for i := range d.rate {
		if !d.learnt[i] && o.learnt[i] {
			d.rate[i], d.learnt[i] = o.rate[i], true
		}
	}
}
