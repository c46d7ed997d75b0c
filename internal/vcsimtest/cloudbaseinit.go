package vcsimtest

import (
	"errors"
	"regexp"

	"github.com/cds-contrib/hatchery-vsphere/internal/cloudinit"
)

// cloudbase-init, played by FakeCloudInit in a VM of the Windows guest
// family (an extension in test code: vcsim has no guest, and cloud-init's
// datasource is not cloudbase-init). Its VMware guestinfo service reads
// the same guestinfo keys and encodings; its userdata plugin runs a
// userdata whose first line is #ps1_sysnative (or #ps1) as a PowerShell
// script. The fake reads, from the script, what a Windows guest running it
// would do before the worker starts: the static address it sets (else
// the guest takes a DHCP lease) and the CDS_CONFIG it puts in its
// environment.

var (
	// psHeader is what cloudbase-init's userdata plugin recognises as a
	// PowerShell script.
	psHeader = regexp.MustCompile(`^#(ps1|ps1_sysnative)\s`)
	// psAddress is the address New-NetIPAddress sets.
	psAddress = regexp.MustCompile(`(?m)^\s*New-NetIPAddress\b.*-IPAddress '([^']+)'`)
	// psConfig is the worker config the script puts in its environment.
	psConfig = regexp.MustCompile(`(?m)^\$env:CDS_CONFIG = '([^']*)'$`)
)

// cloudbaseInitAddress is the static address the userdata of opts sets,
// "" when it sets none (DHCP) or cannot be read.
func cloudbaseInitAddress(opts map[string]string) string {
	ud, err := cloudinit.DecodeGuestinfo(opts[cloudinit.GuestinfoUserdata], opts[cloudinit.GuestinfoUserdataEncoding])
	if err != nil {
		return ""
	}
	if m := psAddress.FindSubmatch(ud); m != nil {
		return string(m[1])
	}
	return ""
}

// playCloudbaseInit checks a Windows userdata as cloudbase-init would run
// it and returns the CDS_CONFIG it sets.
func playCloudbaseInit(ud []byte) (string, error) {
	if !psHeader.Match(ud) {
		return "", errors.New("cloudbase-init: userdata is no PowerShell script (#ps1_sysnative)")
	}
	m := psConfig.FindSubmatch(ud)
	if m == nil {
		return "", errors.New("cloudbase-init: the script sets no CDS_CONFIG")
	}
	return string(m[1]), nil
}
