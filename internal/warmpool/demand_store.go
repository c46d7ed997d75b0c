package warmpool

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/internal/poolsize"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/cds-contrib/hatchery-vsphere/sdk/logkey"
)

// DemandStore keeps what the pools learnt where every instance of the
// hatchery sees it: custom attributes of the hatchery's VM folder in
// vCenter (vctypes.Attributes implements it), never a local file
// (docs/warm-pools.md, "After a restart"). Its errors carry their fault
// kind.
type DemandStore interface {
	// FolderAttribute reads the attribute name: its value and true,
	// false when there is none.
	FolderAttribute(ctx context.Context, name string) (value string, ok bool, err error)
	// SetFolderAttribute sets the attribute name to value; the last
	// writer wins.
	SetFolderAttribute(ctx context.Context, name, value string) error
}

// demandSaveEvery is how often a pool's learnt demand is written: a
// quarter hour's bucket learns once per quarter hour and a week's rate
// moves by a third of a week's reading, so an hour's writes lose at most
// four buckets' newest reading at a restart, for one request per pool an
// hour.
const demandSaveEvery = time.Hour

// demandRetry is how long after a failed read or write of a pool's
// record the next one is tried: the next pass at least that late, so a
// vCenter in trouble gets one request per pool every few minutes, not
// one per pass.
const demandRetry = 5 * time.Minute

// demandAttributePrefix starts the name of the attribute a pool's learnt
// demand is kept in.
const demandAttributePrefix = "hatchery-vsphere.demand."

// DemandAttribute is the name of the folder attribute the learnt demand
// of pool k of hatchery is kept in: one per pool, so that each value
// stays one pool's (about 1.9 KB) and two hatcheries sharing a folder do
// not share a record.
func DemandAttribute(hatchery string, k Key) string {
	return demandAttributePrefix + hatchery + "." + strings.TrimSuffix(k.slotPrefix(), "-")
}

// demandRecord is the state of a pool's record in the store.
type demandRecord struct {
	loaded bool      // read (found or not): the pool's writes may start
	next   time.Time // when the next read (not loaded) or write is due
}

// loadDemand reads pool k's record once, before its first decision, and
// merges it into what the pool learnt since the start (poolsize.Demand.Merge):
// a restarted instance sizes the pool from the week it learnt before. A
// failed read is retried demandRetry later; until one succeeds the pool
// learns from the queue alone and writes nothing (it would overwrite the
// record with less).
func (p *Pool) loadDemand(ctx context.Context, k Key) {
	d, now := p.Demand, p.Now()
	d.mu.Lock()
	rec := d.records[k]
	due := !rec.loaded && !now.Before(rec.next)
	d.mu.Unlock()
	if !due || p.DemandStore == nil {
		return
	}
	name := DemandAttribute(p.Hatchery, k)
	value, ok, err := p.DemandStore.FolderAttribute(ctx, name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.records[k] = demandRecord{next: now.Add(demandRetry)}
		p.logDemandStore(ctx, err, "warm pool learnt demand not read", k, "read again in 5m; until then the pool learns from the queue")
		return
	}
	var stored poolsize.Demand
	if ok {
		if derr := stored.UnmarshalText([]byte(value)); derr != nil {
			// Not this version's record (edited, or written by a later
			// version): reading it again would not help; the next write
			// replaces it.
			ok = false
			p.Log.Info("warm pool learnt demand unreadable", logkey.Model, k.Model, logkey.Flavor, k.Flavor,
				logkey.Detail, "vcenter attribute "+name+" replaced at the next write", logkey.Err, derr)
		}
	}
	if ok {
		d.sizer(k).Demand.Merge(&stored)
		p.Log.Info("warm pool learnt demand read", logkey.Model, k.Model, logkey.Flavor, k.Flavor, logkey.Detail, "from vcenter attribute "+name)
	}
	d.records[k] = demandRecord{loaded: true, next: now.Add(demandSaveEvery)}
}

// SaveDemand writes, now, the learnt demand of every pool whose record
// was read: the hatchery's clean shutdown, after its loops stopped, so
// that a restart loses nothing of the last hour. ctx bounds it.
func (p *Pool) SaveDemand(ctx context.Context) {
	if p.Demand == nil || p.DemandStore == nil {
		return
	}
	p.Demand.mu.Lock()
	var keys []Key
	for k, rec := range p.Demand.records {
		if rec.loaded {
			keys = append(keys, k)
		}
	}
	p.Demand.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	for _, k := range keys {
		p.saveDemand(ctx, k, true)
	}
}

// saveDemand writes pool k's learnt demand when its hour is due, or now
// when force (after its record was read, in both cases). A failed write
// is retried demandRetry later.
func (p *Pool) saveDemand(ctx context.Context, k Key, force bool) {
	d, now := p.Demand, p.Now()
	if p.DemandStore == nil {
		return
	}
	d.mu.Lock()
	rec := d.records[k]
	if !rec.loaded || (!force && now.Before(rec.next)) {
		d.mu.Unlock()
		return
	}
	text, err := d.sizer(k).Demand.MarshalText()
	d.mu.Unlock()
	if err == nil {
		err = p.DemandStore.SetFolderAttribute(ctx, DemandAttribute(p.Hatchery, k), string(text))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.records[k] = demandRecord{loaded: true, next: now.Add(demandRetry)}
		p.logDemandStore(ctx, err, "warm pool learnt demand not saved", k, "written again in 5m; a restart before then loses at most the last hour's learning")
		return
	}
	d.records[k] = demandRecord{loaded: true, next: now.Add(demandSaveEvery)}
}

// logDemandStore logs a failed read or write of a pool's record. Not a
// WARN: nothing the pool serves depends on it (the pool is sized from the
// queue meanwhile), it is retried, and a vCenter that does not answer is
// logged by the vCenter client itself when the outage starts and ends, so
// that case is DEBUG; a fault vCenter answered (a privilege missing, the
// field refused) is INFO with the error, which names the attribute and
// carries the fault's kind, once per retry (every 5 minutes per pool at
// most).
func (p *Pool) logDemandStore(ctx context.Context, err error, msg string, k Key, detail string) {
	level := slog.LevelInfo
	if vctypes.Unanswered(err) || errors.Is(err, vctypes.ErrNotConnected) {
		level = slog.LevelDebug
	}
	p.Log.Log(ctx, level, msg, logkey.Model, k.Model, logkey.Flavor, k.Flavor,
		logkey.Detail, detail, logkey.Err, err)
}
