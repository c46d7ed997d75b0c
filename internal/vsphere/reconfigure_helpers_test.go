package vsphere

import "github.com/cds-contrib/hatchery-vsphere/internal/vctypes"

// writtenNotes is the Notes a reconfigure writes, in the order the
// adapter builds it (vim.ConfigSpecOf): its Notes, overwritten by its
// ownership record's ("" when it writes none).
func writtenNotes(c vctypes.ConfigChange) string {
	notes := ""
	if c.Notes != nil {
		notes = *c.Notes
	}
	if c.Record != nil {
		notes = c.Record.Notes
	}
	return notes
}

// writtenOptions are the options a reconfigure sets, in the adapter's
// order: its ownership record's mirror, then its own.
func writtenOptions(c vctypes.ConfigChange) []vctypes.Option {
	var out []vctypes.Option
	if c.Record != nil {
		out = append(out, c.Record.Options...)
	}
	return append(out, c.Options...)
}

// optionMap is opts by key (the last of a key wins, as in vCenter).
func optionMap(opts []vctypes.Option) map[string]string {
	out := map[string]string{}
	for _, o := range opts {
		out[o.Key] = o.Value
	}
	return out
}
