package instantparent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
	"github.com/cds-contrib/hatchery-vsphere/internal/vctypes"
)

func instantConfig() *config.Config {
	c := config.Default()
	c.DefaultBootstrap = config.BootstrapCloudInit
	c.Flavors = []config.Flavor{{Name: "small", CPUs: 2, MemoryMB: 4096}, {Name: "large", CPUs: 8, MemoryMB: 16384}}
	c.GuestCredentials = []config.GuestCredential{
		{ModelVMWare: "debian12", CloneMode: config.CloneModeInstant},
		{ModelVMWare: "rocky9"}, // linked: no parent
	}
	c.Models = []config.GuestCredential{{ModelPath: "grp/v1model", CloneMode: config.CloneModeInstant}}
	return &c
}

func findAll(t modelref.Template) (string, string, bool) {
	return "vm-" + t.Name, "v1", true
}

// TestWants: one parent per instant model's template and placement, at
// the template's size; a flavor in demand adds its own; a linked model,
// an unknown flavor and another template's demand add none; a placement's
// template copy is what its parent clones.
func TestWants(t *testing.T) {
	t.Parallel()
	c := instantConfig()
	w := Wants(c, findAll, []Key{
		{Template: "debian12", Placement: config.DefaultPlacementName, Flavor: "large"},
		{Template: "debian12", Placement: config.DefaultPlacementName, Flavor: "huge"}, // not configured
		{Template: "rocky9", Placement: config.DefaultPlacementName, Flavor: "large"},  // not instant
	})
	var keys []string
	for _, x := range w {
		keys = append(keys, x.Key.String())
	}
	assert.Equal(t, []string{"debian12/default", "debian12/default/large", "v1model/default"}, keys)
	assert.True(t, w[2].Template.Built, "a V1 model's parent clones this hatchery's template of it")
	assert.Equal(t, TemplateVersion("debian12", "debian12", "vm-debian12", "v1"), w[0].Version)
	assert.Equal(t, Key{Template: "debian12", Placement: "default"}, KeyOf(w[0].Version, "", ""), "the record gives the key back")

	c.Placements = []config.Placement{{Name: "a", TemplateCopies: []config.TemplateCopy{{Template: "debian12", Copy: "debian12-a"}}}, {Name: "b"}}
	c.Models = nil
	w = Wants(c, findAll, nil)
	require.Len(t, w, 2)
	assert.Equal(t, Key{Template: "debian12", Placement: "a"}, w[0].Key)
	assert.Equal(t, "debian12-a", w[0].Template.Name, "placement a clones its copy")
	assert.Equal(t, "debian12", KeyTemplateOf(w[0].Version), "the record names the model's template")
	assert.Equal(t, "a", w[0].Placement.Name)
	assert.Equal(t, "debian12", w[1].Template.Name)

	none := func(modelref.Template) (string, string, bool) { return "", "", false }
	w = Wants(c, none, nil)
	assert.Empty(t, w[0].Version, "a template not found has no version: nothing is built from it")
}

// TestDecide: each case of a pass's decision.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	k := Key{Template: "debian12", Placement: "default"}
	kl := Key{Template: "debian12", Placement: "default", Flavor: "large"}
	v1 := TemplateVersion("debian12", "debian12", "vm-1", "a")
	v2 := TemplateVersion("debian12", "debian12", "vm-1", "b")
	want := []Want{{Key: k, Version: v1}, {Key: kl, Version: v1}}
	up := func(name string, key Key, version string, age time.Duration) Parent {
		return Parent{Name: name, Key: key, Version: version, Created: now.Add(-age), Power: vctypes.PoweredOn, GuestUp: true}
	}
	names := func(rs []Removal) map[string]string {
		out := map[string]string{}
		for _, r := range rs {
			out[r.Parent.Name] = r.Reason
		}
		return out
	}
	cases := []struct {
		name      string
		in        Input
		ready     []string
		build     []Key
		remove    map[string]string
		failedAny bool
	}{
		{name: "nothing yet: both built", in: Input{Wants: want}, build: []Key{k, kl}},
		{name: "ready parent kept, the other built", in: Input{Wants: want, Have: []Parent{up("p1", k, v1, time.Hour)}},
			ready: []string{"p1"}, build: []Key{kl}, remove: map[string]string{}},
		{name: "template changed: replaced", in: Input{Wants: []Want{{Key: k, Version: v2}}, Have: []Parent{up("p1", k, v1, time.Hour)}},
			build: []Key{k}, remove: map[string]string{"p1": "its template changed: replaced"}},
		{name: "template not found: kept, nothing built", in: Input{Wants: []Want{{Key: k}}, Have: []Parent{up("p1", k, v1, time.Hour)}},
			ready: []string{"p1"}, remove: map[string]string{}},
		{name: "unused: destroyed", in: Input{Have: []Parent{up("p1", k, v1, time.Hour)}},
			remove: map[string]string{"p1": "no instant model uses it"}},
		{name: "powered off: failed", in: Input{Wants: []Want{{Key: k, Version: v1}}, Have: []Parent{{Name: "p1", Key: k, Version: v1, Power: vctypes.PoweredOff}}},
			build: []Key{k}, remove: map[string]string{"p1": "failed: powered off"}, failedAny: true},
		{name: "guest gone: failed", in: Input{Wants: []Want{{Key: k, Version: v1}}, GuestGrace: time.Minute,
			Have: []Parent{{Name: "p1", Key: k, Version: v1, Power: vctypes.PoweredOn, Created: now.Add(-time.Hour)}}},
			build: []Key{k}, remove: map[string]string{"p1": "failed: guest gone: no address, no guest operations"}, failedAny: true},
		{name: "guest coming up: kept, not ready, not built again", in: Input{Wants: []Want{{Key: k, Version: v1}}, GuestGrace: time.Minute,
			Have: []Parent{{Name: "p1", Key: k, Version: v1, Power: vctypes.PoweredOn, Created: now.Add(-time.Second)}}},
			remove: map[string]string{}},
		{name: "marked failed by a spawn", in: Input{Wants: []Want{{Key: k, Version: v1}}, Have: []Parent{up("p1", k, v1, time.Hour)}, Failed: map[string]string{"p1": "fork failed"}},
			build: []Key{k}, remove: map[string]string{"p1": "failed: fork failed"}, failedAny: true},
		{name: "two parents: the older kept", in: Input{Wants: []Want{{Key: k, Version: v1}}, Have: []Parent{up("p2", k, v1, time.Minute), up("p1", k, v1, time.Hour)}},
			ready: []string{"p1"}, remove: map[string]string{"p2": "a second parent of debian12/default"}},
		// Two instances of one hatchery name both build a parent at start;
		// each destroys the younger, powering it off first: the other's
		// next pass may see it powered off. It is a second parent, not a
		// failure of the key (no quarantine, no WARN: the demo's
		// --instances 2 logged 'instant parent quarantined').
		{name: "two parents, the younger powered off: a second parent, no failure", in: Input{Wants: []Want{{Key: k, Version: v1}},
			Have:   []Parent{{Name: "p2", Key: k, Version: v1, Created: now.Add(-time.Minute), Power: vctypes.PoweredOff}, up("p1", k, v1, time.Hour)},
			Failed: map[string]string{"p2": "fork failed"}},
			ready: []string{"p1"}, remove: map[string]string{"p2": "a second parent of debian12/default"}},
		{name: "being built: not built twice", in: Input{Wants: want, Building: map[Key]bool{k: true}}, build: []Key{kl}},
		{name: "quarantined: not built", in: Input{Wants: want, Quarantined: func(x Key) bool { return x == kl }}, build: []Key{k}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			p := Decide(tc.in)
			var ready []string
			for _, r := range p.Ready {
				ready = append(ready, r.Name)
			}
			assert.ElementsMatch(t, tc.ready, ready, "ready")
			var build []Key
			for _, b := range p.Build {
				build = append(build, b.Key)
			}
			assert.Equal(t, tc.build, build, "build")
			if tc.remove != nil {
				assert.Equal(t, tc.remove, names(p.Remove), "remove")
			}
			failed := false
			for _, r := range p.Remove {
				failed = failed || r.Failed
			}
			assert.Equal(t, tc.failedAny, failed, "a failure quarantines")
		})
	}
}

// TestStateQuarantineAndReady: a parent marked failed serves no child at
// once; its key's first failure is rebuilt at once, the next waits the
// back-off; a ready parent ends the run of failures.
func TestStateQuarantineAndReady(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	k := Key{Template: "debian12", Placement: "default"}
	s := NewState()
	_, ok := s.Ready(k)
	assert.False(t, ok)
	assert.Equal(t, "no parent ready", s.Why(k, now))
	s.Apply(Plan{Ready: map[Key]Parent{k: {Name: "p1", Key: k}}})
	p, ok := s.Ready(k)
	require.True(t, ok)
	assert.Equal(t, "p1", p.Name)

	s.MarkFailed("p1", "fork failed: host unavailable")
	_, ok = s.Ready(k)
	assert.False(t, ok, "a failed parent serves no child")
	assert.Contains(t, s.Why(k, now), "parent failed")
	assert.Equal(t, map[string]string{"p1": "fork failed: host unavailable"}, s.Failed())

	until := s.Quarantine(k, now, "powered off")
	assert.Equal(t, now, until, "the first failure is rebuilt at once")
	assert.False(t, s.Quarantined(k, now))
	until = s.Quarantine(k, now, "powered off")
	assert.Equal(t, now.Add(BackoffMin), until)
	assert.True(t, s.Quarantined(k, now))
	assert.Contains(t, s.Why(k, now), "quarantine")
	for i := 0; i < 10; i++ {
		until = s.Quarantine(k, now, "powered off")
	}
	assert.Equal(t, now.Add(BackoffMax), until, "bounded")

	s.Apply(Plan{Ready: map[Key]Parent{k: {Name: "p2", Key: k}}})
	assert.False(t, s.Quarantined(k, now), "a ready parent ends the failures")
	assert.Empty(t, s.Failed(), "the removed parent's mark is dropped")
	assert.Equal(t, now, s.Quarantine(k, now, "again"), "a new run of failures starts over")

	assert.True(t, s.BeginBuild(k))
	assert.False(t, s.BeginBuild(k), "one build per key")
	assert.Equal(t, map[Key]bool{k: true}, s.Building())
	s.EndBuild(k, now, "")
	assert.Empty(t, s.Building())

	// A parent built but not yet shown by a lagging inventory is not
	// built again; shown (or too old), the key is free.
	s.Built(k, "p3", now)
	s.Seen(nil, now.Add(time.Minute))
	assert.True(t, s.Building()[k])
	s.Seen([]Parent{{Name: "p3", Key: k}}, now.Add(time.Minute))
	assert.Empty(t, s.Building())
	s.Built(k, "p4", now)
	s.Seen(nil, now.Add(PendingTTL+time.Second))
	assert.Empty(t, s.Building())
}

// TestStateDemand: a flavored key asked for stays wanted DemandTTL.
func TestStateDemand(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := NewState()
	k := Key{Template: "debian12", Placement: "default", Flavor: "large"}
	s.Want(Key{Template: "debian12", Placement: "default"}, now)
	s.Want(k, now)
	assert.Equal(t, []Key{k}, s.Demand(now.Add(DemandTTL)))
	assert.Empty(t, s.Demand(now.Add(DemandTTL+time.Second)))
}

// TestName: a parent's VM name names its hatchery, key and suffix in
// lower case.
func TestName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "hatch-parent-debian12-default-large-x1", Name("hatch", Key{Template: "Debian12", Placement: "default", Flavor: "large"}, "x1"))
	assert.Equal(t, "h-parent-ubuntu-22.04-a-b-z", Name("h", Key{Template: "ubuntu 22.04", Placement: "a_b"}, "z"))
}
