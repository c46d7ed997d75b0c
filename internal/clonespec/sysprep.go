package clonespec

import (
	"fmt"
	"hash/fnv"

	"github.com/cds-contrib/hatchery-vsphere/internal/config"
	"github.com/cds-contrib/hatchery-vsphere/internal/inventory"
)

// maxComputerNameLen is the NetBIOS limit of a Windows computer name.
const maxComputerNameLen = 15

// WindowsComputerName is the computer name of a Windows worker named
// name (docs/windows.md): its hostname (SanitizeHostname) when it fits
// Windows's 15 characters, else its first 10 characters, a dash and 4 hex
// digits of a hash of the whole name, so that two long names sharing a
// prefix do not give one computer name.
func WindowsComputerName(name string) string {
	h := SanitizeHostname(name)
	if len(h) <= maxComputerNameLen {
		return h
	}
	sum := fnv.New32a()
	_, _ = sum.Write([]byte(name)) // a hash.Hash never fails
	prefix := h[:maxComputerNameLen-5]
	for len(prefix) > 0 && prefix[len(prefix)-1] == '-' {
		prefix = prefix[:len(prefix)-1]
	}
	return fmt.Sprintf("%s-%04x", prefix, sum.Sum32()&0xffff)
}

// isWindows tells whether the VM recorded by annot is a Windows model's
// (config.Config.OSOfRecord): its clone is customized by sysprep.
func (b *Builder) isWindows(annot *inventory.Annotation) bool {
	cfg := b.cfg
	if b.live != nil {
		cfg = b.live()
	}
	return cfg.OSOfRecord(annot.WorkerModelPath, annot.VMwareModelPath) == config.OSWindows
}
