package placement

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gb = int64(1) << 30

func space(name string, freeGB int64) Datastore {
	return Datastore{Name: name, Space: &vctypes.DatastoreSpace{Name: name, FreeBytes: freeGB * gb, CapacityBytes: 1000 * gb, Accessible: true}}
}

func pool(memMB int64) *vctypes.PoolRuntime {
	return &vctypes.PoolRuntime{CPUUnreservedMHz: 10000, MemoryUnreservedBytes: memMB << 20}
}

func TestHeadroom(t *testing.T) {
	t.Parallel()
	fp := Footprint{CPUs: 2, MemoryMB: 1024, DiskBytes: 10 * gb}
	for _, tc := range []struct {
		name    string
		f       Figures
		room    int64
		ds      string
		whyPart string
		whyCode WhyCode
	}{
		{"nothing limits", Figures{Placement: config.Placement{Name: "a"}}, Unlimited, "", "", ""},
		{"maxVMs", Figures{Placement: config.Placement{Name: "a", MaxVMs: 5}, VMs: 3}, 2, "", "", ""},
		{"maxVMs reached", Figures{Placement: config.Placement{Name: "a", MaxVMs: 5}, VMs: 5}, 0, "", "maxVMs 5 reached", WhyMaxVMs},
		{"maxCpus", Figures{Placement: config.Placement{Name: "a", MaxCPUs: 9}, CPUs: 2}, 3, "", "", ""},
		{"maxCpus reached", Figures{Placement: config.Placement{Name: "a", MaxCPUs: 9}, CPUs: 8}, 0, "", "maxCpus 9 reached", WhyMaxCPUs},
		{"maxMemoryMB", Figures{Placement: config.Placement{Name: "a", MaxMemoryMB: 4096}, MemoryMB: 1024}, 3, "", "", ""},
		{"maxMemoryMB reached", Figures{Placement: config.Placement{Name: "a", MaxMemoryMB: 4096}, MemoryMB: 4000}, 0, "", "maxMemoryMB 4096 reached", WhyMaxMemory},
		{"tasks in flight", Figures{Placement: config.Placement{Name: "a", MaxConcurrentTasks: 2}, TasksInFlight: 2}, 0, "", "maxConcurrentTasks 2 in flight", WhyMaxTasks},
		{"pool memory less in flight", Figures{Placement: config.Placement{Name: "a"}, Pool: pool(8192), InFlightMemoryMB: 2048}, 6, "", "", ""},
		{"pool memory short", Figures{Placement: config.Placement{Name: "a"}, Pool: pool(4096), InFlightMemoryMB: 3584}, 0, "", "resource pool unreserved memory insufficient", WhyPoolMemory},
		{"pool without cpu", Figures{Placement: config.Placement{Name: "a"}, Pool: &vctypes.PoolRuntime{MemoryUnreservedBytes: 8 * gb}}, 0, "", "no unreserved cpu", WhyPoolCPU},
		{"datastore with most free above floor", Figures{Placement: config.Placement{Name: "a", DatastoreFloorGB: 20},
			Datastores: []Datastore{space("ds1", 50), space("ds2", 80)}}, 6, "ds2", "", ""},
		{"datastore at its floor skipped", Figures{Placement: config.Placement{Name: "a", DatastoreFloorGB: 20},
			Datastores: []Datastore{space("ds1", 25), space("ds2", 45)}}, 2, "ds2", "", ""},
		{"every datastore at its floor", Figures{Placement: config.Placement{Name: "a", DatastoreFloorGB: 20},
			Datastores: []Datastore{space("ds1", 25), space("ds2", 20)}}, 0, "", "datastore ds2 at its floor", WhyDatastores},
		{"inaccessible datastore", Figures{Placement: config.Placement{Name: "a"},
			Datastores: []Datastore{{Name: "ds1", Space: &vctypes.DatastoreSpace{FreeBytes: 100 * gb}}}}, 0, "", "datastore ds1 inaccessible", WhyDatastores},
		{"unread datastore taken when none read fits", Figures{Placement: config.Placement{Name: "a", DatastoreFloorGB: 20},
			Datastores: []Datastore{space("ds1", 10), {Name: "ds2"}}}, 1, "ds2", "", ""},
		{"least limit wins", Figures{Placement: config.Placement{Name: "a", MaxVMs: 10, MaxCPUs: 8}, VMs: 1, CPUs: 2,
			Datastores: []Datastore{space("ds1", 100)}}, 3, "ds1", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room, ds, why := Headroom(fp, tc.f)
			assert.Equal(t, tc.room, room)
			assert.Equal(t, tc.ds, ds)
			assert.Equal(t, tc.whyCode, why.Code, "the code of %q", why)
			if tc.whyPart != "" {
				assert.Contains(t, why.String(), tc.whyPart)
			}
		})
	}
}

func TestHeadroomUnknownDiskNeedsRoomAboveTheFloor(t *testing.T) {
	t.Parallel()
	f := Figures{Placement: config.Placement{Name: "a", DatastoreFloorGB: 20}, Datastores: []Datastore{space("ds1", 20)}}
	room, _, why := Headroom(Footprint{CPUs: 1, MemoryMB: 512}, f)
	assert.Zero(t, room)
	assert.Equal(t, WhyDatastores, why.Code)
	assert.Contains(t, why.String(), "at its floor")
	f.Datastores = []Datastore{space("ds1", 21)}
	room, ds, _ := Headroom(Footprint{CPUs: 1, MemoryMB: 512}, f)
	assert.Equal(t, Unlimited, room)
	assert.Equal(t, "ds1", ds)
}

func TestChoose(t *testing.T) {
	t.Parallel()
	fp := Footprint{CPUs: 2, MemoryMB: 1024}
	p := func(name string, maxVMs, weight int) config.Placement {
		return config.Placement{Name: name, MaxVMs: maxVMs, Weight: weight}
	}
	none := func(string) (bool, Why) { return true, Why{} }
	for _, tc := range []struct {
		name     string
		figs     []Figures
		eligible Eligibility
		want     string
		notTaken map[string]string // substring per name
	}{
		{"most headroom", []Figures{{Placement: p("a", 4, 0), VMs: 2}, {Placement: p("b", 10, 0), VMs: 2}}, none, "b",
			map[string]string{"a": "less headroom (2 clones against 8 clones)"}},
		{"weight scales", []Figures{{Placement: p("a", 4, 5), VMs: 2}, {Placement: p("b", 10, 1), VMs: 2}}, none, "a",
			map[string]string{"b": "less headroom"}},
		{"tie to fewer vms", []Figures{{Placement: p("a", 0, 0), VMs: 3}, {Placement: p("b", 0, 0), VMs: 1}}, none, "b",
			map[string]string{"a": "same headroom (unlimited)"}},
		{"tie to the name", []Figures{{Placement: p("b", 0, 0)}, {Placement: p("a", 0, 0)}}, none, "a",
			map[string]string{"b": "same headroom"}},
		{"full one skipped", []Figures{{Placement: p("a", 2, 0), VMs: 2}, {Placement: p("b", 3, 0), VMs: 2}}, none, "b",
			map[string]string{"a": "maxVMs 2 reached"}},
		{"not eligible skipped", []Figures{{Placement: p("a", 0, 0)}, {Placement: p("b", 1, 0)}},
			func(n string) (bool, Why) { return n != "a", Why{WhyCordoned, "cordoned by ops"} }, "b",
			map[string]string{"a": "cordoned by ops"}},
		{"none fits", []Figures{{Placement: p("a", 1, 0), VMs: 1}, {Placement: p("b", 1, 0), VMs: 1}}, none, "",
			map[string]string{"a": "maxVMs 1 reached", "b": "maxVMs 1 reached"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Choose(fp, tc.figs, tc.eligible)
			assert.Equal(t, tc.want != "", c.OK)
			assert.Equal(t, tc.want, c.Placement)
			if c.OK {
				assert.Equal(t, tc.want, tc.figs[c.Index].Placement.Name)
				assert.NotContains(t, c.NotTaken, tc.want)
			}
			for n, part := range tc.notTaken {
				assert.Contains(t, c.NotTaken[n].String(), part, n)
			}
			assert.Len(t, c.NotTaken, len(tc.figs)-map[bool]int{true: 1, false: 0}[c.OK])
		})
	}
}

// TestChooseSpreadsByHeadroom places clones one after the other, each
// counted where it went: the placements fill in proportion to their room.
func TestChooseSpreadsByHeadroom(t *testing.T) {
	t.Parallel()
	figs := []Figures{
		{Placement: config.Placement{Name: "a", MaxVMs: 6}},
		{Placement: config.Placement{Name: "b", MaxVMs: 3}},
	}
	counts := map[string]int{}
	for {
		c := Choose(Footprint{CPUs: 1, MemoryMB: 512}, figs, nil)
		if !c.OK {
			assert.True(t, strings.Contains(c.Reason(), "a: maxVMs 6 reached"), c.Reason())
			break
		}
		figs[c.Index].VMs++
		counts[c.Placement]++
	}
	assert.Equal(t, map[string]int{"a": 6, "b": 3}, counts)
}

// TestWhyRenderedTheSameWay: a placement not taken carries a code from
// WhyCodes (less headroom, same headroom, full) and renders as its detail
// the same way in the decision's account (Choice.Reason) and in a log line
// (log/slog, through MarshalText), never as a struct.
func TestWhyRenderedTheSameWay(t *testing.T) {
	t.Parallel()
	p := func(name string, maxVMs int) Figures {
		return Figures{Placement: config.Placement{Name: name, MaxVMs: maxVMs}}
	}
	full := p("c", 1)
	full.VMs = 1
	c := Choose(Footprint{CPUs: 1, MemoryMB: 512}, []Figures{p("a", 4), p("b", 8), full, p("d", 8)}, nil)
	require.True(t, c.OK)
	assert.Equal(t, "b", c.Placement)
	assert.Equal(t, map[string]WhyCode{"a": WhyLessHeadroom, "c": WhyMaxVMs, "d": WhySameHeadroom},
		map[string]WhyCode{"a": c.NotTaken["a"].Code, "c": c.NotTaken["c"].Code, "d": c.NotTaken["d"].Code})
	for _, w := range c.NotTaken {
		assert.Contains(t, WhyCodes, w.Code)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("decision", "why", c.NotTaken["c"])
	assert.Contains(t, buf.String(), `"why":"maxVMs 1 reached"`)
	assert.Contains(t, c.Reason(), "c: maxVMs 1 reached")
}
