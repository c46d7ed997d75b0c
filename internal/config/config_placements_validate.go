package config

import (
	"fmt"
	"strings"
)

// validatePlacements checks [[placements]] and datastoreFloorGB
// (docs/configuration.md, "Placements"): names non-empty and unique,
// limits, weight and floors not negative, datastores non-empty and not
// repeated, template copies complete and one per template. With
// [[placements]] the top-level resourcePoolString and datastoreString
// are refused: each placement says its own pool and datastores, and a
// top-level one beside them would be a placement of no name (both key
// paths are named).
func (c *Config) validatePlacements(es *Errors) {
	if c.DatastoreFloorGB < 0 {
		es.add("datastoreFloorGB", "%d: must be 0 (no floor) or more", c.DatastoreFloorGB)
	}
	if len(c.Placements) == 0 {
		return
	}
	if c.ResourcePoolString != "" {
		es.add("resourcePoolString", "%q is set together with placements: with [[placements]] each placement names its own resourcePool (hatchery.vsphere.placements[].resourcePool); leave resourcePoolString empty", c.ResourcePoolString)
	}
	if c.DatastoreString != "" {
		es.add("datastoreString", "%q is set together with placements: with [[placements]] each placement names its own datastores (hatchery.vsphere.placements[].datastores); leave datastoreString empty", c.DatastoreString)
	}
	names := map[string]int{}
	for i, p := range c.Placements {
		k := fmt.Sprintf("placements[%d]", i)
		switch name := strings.TrimSpace(p.Name); {
		case name == "":
			es.add(k+".name", "required: names the placement in logs, metrics, /mon/status, ctl and the VM's record")
		case name != p.Name:
			es.add(k+".name", "%q has leading or trailing spaces", p.Name)
		default:
			if j, dup := names[name]; dup {
				es.add(k+".name", "duplicate of placements[%d]", j)
			} else {
				names[name] = i
			}
		}
		for _, n := range []struct {
			key string
			v   int64
		}{
			{"maxCpus", int64(p.MaxCPUs)}, {"maxMemoryMB", p.MaxMemoryMB}, {"maxVMs", int64(p.MaxVMs)},
			{"maxConcurrentTasks", int64(p.MaxConcurrentTasks)}, {"weight", int64(p.Weight)}, {"datastoreFloorGB", p.DatastoreFloorGB},
		} {
			if n.v < 0 {
				es.add(k+"."+n.key, "%d: must be 0 (unset) or more", n.v)
			}
		}
		seen := map[string]int{}
		for j, d := range p.Datastores {
			dk := fmt.Sprintf("%s.datastores[%d]", k, j)
			if strings.TrimSpace(d) == "" {
				es.add(dk, "empty: a datastore's name or path")
				continue
			}
			if first, dup := seen[d]; dup {
				es.add(dk, "%q repeats datastores[%d]", d, first)
				continue
			}
			seen[d] = j
		}
		copies := map[string]int{}
		for j, tc := range p.TemplateCopies {
			tk := fmt.Sprintf("%s.templateCopies[%d]", k, j)
			if strings.TrimSpace(tc.Template) == "" {
				es.add(tk+".template", "required: the template this copy replaces in the placement")
			}
			if strings.TrimSpace(tc.Copy) == "" {
				es.add(tk+".copy", "required: the template cloned instead of template in the placement")
			}
			if tc.Template == "" {
				continue
			}
			if first, dup := copies[tc.Template]; dup {
				es.add(tk+".template", "%q already has a copy in templateCopies[%d]: one per template", tc.Template, first)
				continue
			}
			copies[tc.Template] = j
		}
	}
}
