package config

import (
	"fmt"
	"strings"
)

// TemplateFoldersSet tells whether templateFolders is set. The inventory
// always has a scope (internal/vcenter/govmomi_scope.go,
// docs/inventory-watch.md "Scope"): the hatchery's folder (folderString
// with its subtree; empty, the VM folder's top level, where clones go),
// the [[placements]] entries' folders, and the template folders: set,
// these (subtrees included; a template elsewhere is never used); unset,
// derived: the VM folder's top level and the folder of each template
// found by name. To read the whole VM folder as before the scope existed,
// set templateFolders = ["/<datacenter>/vm"].
func (c *Config) TemplateFoldersSet() bool { return len(c.TemplateFolders) > 0 }

// validateTemplateFolders checks templateFolders: each entry an absolute
// inventory path of a VM folder of the configured datacenter
// ("/<datacenter>/vm" or below), written once, with no empty segment.
// Whether the folder exists is vCenter's to say (at start).
func (c *Config) validateTemplateFolders(es *Errors) {
	dc := strings.TrimSuffix(strings.TrimSpace(c.DatacenterString), "/")
	vmRoot := ""
	if dc != "" {
		if !strings.HasPrefix(dc, "/") {
			dc = "/" + dc
		}
		vmRoot = dc + "/vm"
	}
	seen := map[string]int{}
	for i, f := range c.TemplateFolders {
		key := fmt.Sprintf("templateFolders[%d]", i)
		switch {
		case strings.TrimSpace(f) == "":
			es.add(key, "empty: each entry is the inventory path of a VM folder, e.g. %q", exampleTemplateFolder(vmRoot))
			continue
		case f != strings.TrimSpace(f):
			es.add(key, "%q has leading or trailing spaces", f)
			continue
		case !strings.HasPrefix(f, "/"):
			es.add(key, "%q is not an inventory path: write it from the root, e.g. %q", f, exampleTemplateFolder(vmRoot))
			continue
		case strings.Contains(f, "//") || (len(f) > 1 && strings.HasSuffix(f, "/")):
			es.add(key, "%q has an empty path segment", f)
			continue
		case vmRoot != "" && f != vmRoot && !strings.HasPrefix(f, vmRoot+"/"):
			es.add(key, "%q is not in the VM folder of datacenter %q: it must be %q or a folder below it", f, c.DatacenterString, vmRoot)
			continue
		}
		if j, dup := seen[f]; dup {
			es.add(key, "%q is a duplicate of templateFolders[%d]", f, j)
			continue
		}
		seen[f] = i
	}
}

// exampleTemplateFolder is an example entry of templateFolders for the
// datacenter's VM folder vmRoot.
func exampleTemplateFolder(vmRoot string) string {
	if vmRoot == "" {
		vmRoot = "/datacenter1/vm"
	}
	return vmRoot + "/templates"
}
