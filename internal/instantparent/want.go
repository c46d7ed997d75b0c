package instantparent

import (
	"sort"
	"strings"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/modelref"
)

// Key names a parent: the template its children's model clones (the
// model's template, modelref's rule), the placement it runs in (a
// config.Placement's name) and the flavor of its size ("" for the
// template's own size).
type Key struct {
	Template  string
	Placement string
	Flavor    string
}

// String is the key as logs show it: template/placement[/flavor].
func (k Key) String() string {
	s := k.Template + "/" + k.Placement
	if k.Flavor != "" {
		s += "/" + k.Flavor
	}
	return s
}

// Want is a parent that must exist.
type Want struct {
	Key Key
	// Template is the template the parent is cloned from: the model's,
	// or the placement's copy of it (config.Placement.CopyOf).
	Template modelref.Template
	// Placement is where the parent runs: its pool, datastores and folder.
	Placement config.Placement
	// Model names the model entry (its modelVMWare or modelPath) in logs.
	Model string
	// Version is the template's identity as the inventory shows it now
	// (TemplateVersion), "" while the template is not found: no parent is
	// built then, and the parents there are kept (a lagging read is no
	// reason to destroy them).
	Version string
}

// TemplateVersion is the identity a parent's record keeps of its template
// (inventory.Annotation.ParentTemplate): the model's template (the key's),
// then the template cloned (the model's or a placement's copy of it), its
// managed object id and its config.changeVersion:
// "<key template>=<cloned>@<ref>#<changeVersion>". A template recreated or
// reconfigured has another one, and its parent is replaced.
func TemplateVersion(keyTemplate, cloned, ref, changeVersion string) string {
	return keyTemplate + "=" + cloned + "@" + ref + "#" + changeVersion
}

// KeyTemplateOf is the key's template a parent's record names
// (TemplateVersion), "" when the record names none.
func KeyTemplateOf(version string) string {
	k, _, ok := strings.Cut(version, "=")
	if !ok {
		return ""
	}
	return k
}

// KeyOf is the key of a parent from its record: the template of its
// parent_template, its placement (config.PlacementNameOf: DefaultPlacementName
// for a record without one) and its flavor.
func KeyOf(parentTemplate, placement, flavor string) Key {
	return Key{Template: KeyTemplateOf(parentTemplate), Placement: config.PlacementNameOf(placement), Flavor: flavor}
}

// Lookup finds a template in the inventory: its reference and its
// config.changeVersion, false when it is not there.
type Lookup func(t modelref.Template) (ref, changeVersion string, ok bool)

// Wants returns the parents cfg asks for, sorted by key: for every model
// entry whose cloneMode is instant (config.Config.InstantEntries) and
// every placement (config.Config.EffectivePlacements), one parent of the
// template's size, and one of each flavor in demand for that template and
// placement (State.Demand: a job of that flavor came lately).
func Wants(cfg *config.Config, find Lookup, demand []Key) []Want {
	byKey := map[Key]Want{}
	for _, g := range cfg.InstantEntries() {
		tpl := modelref.OfEntry(g.ModelPath, g.ModelVMWare)
		if tpl.Name == "" {
			continue
		}
		model := g.ModelVMWare
		if model == "" {
			model = g.ModelPath
		}
		for _, p := range cfg.EffectivePlacements() {
			src := tpl
			src.Name = p.CopyOf(tpl.Name)
			version := ""
			if ref, cv, ok := find(src); ok {
				version = TemplateVersion(tpl.Name, src.Name, ref, cv)
			}
			flavors := []string{""}
			for _, d := range demand {
				if d.Template == tpl.Name && d.Placement == p.Name && d.Flavor != "" {
					if cfg.FlavorNamed(d.Flavor) != nil {
						flavors = append(flavors, d.Flavor)
					}
				}
			}
			for _, f := range flavors {
				k := Key{Template: tpl.Name, Placement: p.Name, Flavor: f}
				byKey[k] = Want{Key: k, Template: src, Placement: p, Model: model, Version: version}
			}
		}
	}
	out := make([]Want, 0, len(byKey))
	for _, w := range byKey {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// Name is the VM name of a new parent of k for the hatchery named
// hatchery: "<hatchery>-parent-<template>-<placement>[-<flavor>]-<suffix>",
// lower case, the suffix telling a replacement from the parent it
// replaces (both exist for a while).
func Name(hatchery string, k Key, suffix string) string {
	parts := []string{hatchery, "parent", k.Template, k.Placement}
	if k.Flavor != "" {
		parts = append(parts, k.Flavor)
	}
	parts = append(parts, suffix)
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('-')
		}
		for _, r := range strings.ToLower(p) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
				b.WriteRune(r)
			default:
				b.WriteByte('-')
			}
		}
	}
	return b.String()
}
