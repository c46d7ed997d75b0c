package cloudinit

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// cloudbase-init (docs/windows.md): the Windows counterpart of cloud-init.
// Its VMware guestinfo metadata service reads the same four guestinfo
// keys, with the same encodings (gzip+base64 among them): metadata as
// JSON or YAML with instance-id and local-hostname, and the userdata,
// which its UserDataPlugin runs as a PowerShell script when its first line
// is PowerShellHeader. Its network metadata (version 1 only, matching an
// interface by name or MAC address, neither known before the clone) is not
// used: the script sets a static address itself (staticAddressScript).

// PowerShellHeader starts a userdata cloudbase-init runs with the 64-bit
// (native) Windows PowerShell.
const PowerShellHeader = "#ps1_sysnative\n"

// WindowsUserdataDocument renders the userdata of a Windows worker: the
// PowerShell header, the static address when one was leased (addr), the
// worker config put in the script's process environment (CDS_CONFIG:
// the worker, started by the script, inherits it; it is written on no
// command line and in no file of the hatchery's), then b.Script, the
// worker script the caller wrapped for Windows (internal/guest,
// WindowsScript: it powers the VM off when the worker ends).
// cloudbase-init writes the userdata to a temporary file, runs it and
// waits for it, as its userdata plugin does for every script.
func WindowsUserdataDocument(b Boot, addr *Address) ([]byte, error) {
	var s strings.Builder
	s.WriteString(PowerShellHeader)
	if addr != nil {
		net, err := staticAddressScript(*addr)
		if err != nil {
			return nil, err
		}
		s.WriteString(net)
	}
	s.WriteString("$env:" + configEnv + " = " + psQuote(b.CDSConfig) + "\n")
	s.WriteString(b.Script)
	if !strings.HasSuffix(b.Script, "\n") {
		s.WriteByte('\n')
	}
	return []byte(s.String()), nil
}

// psQuote quotes s as a PowerShell verbatim string.
func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// staticAddressScript sets addr on the first physical adapter that is up
// (the clone has one NIC): its IPv4 addresses and routes replaced by the
// address, its default route and DNS servers.
func staticAddressScript(addr Address) (string, error) {
	mask := net.ParseIP(addr.SubnetMask).To4()
	if mask == nil {
		return "", fmt.Errorf("subnet mask %q of ip %s is not an ipv4 mask", addr.SubnetMask, addr.IP)
	}
	ones, bits := net.IPMask(mask).Size()
	if bits == 0 {
		return "", fmt.Errorf("subnet mask %q of ip %s is not a contiguous mask", addr.SubnetMask, addr.IP)
	}
	var s strings.Builder
	s.WriteString("$nic = Get-NetAdapter -Physical | Where-Object Status -eq 'Up' | Sort-Object ifIndex | Select-Object -First 1\n")
	s.WriteString("if ($nic) {\n")
	s.WriteString("  Remove-NetRoute -InterfaceIndex $nic.ifIndex -AddressFamily IPv4 -Confirm:$false -ErrorAction SilentlyContinue\n")
	s.WriteString("  Remove-NetIPAddress -InterfaceIndex $nic.ifIndex -AddressFamily IPv4 -Confirm:$false -ErrorAction SilentlyContinue\n")
	s.WriteString("  New-NetIPAddress -InterfaceIndex $nic.ifIndex -IPAddress " + psQuote(addr.IP) + " -PrefixLength " + strconv.Itoa(ones))
	if addr.Gateway != "" {
		s.WriteString(" -DefaultGateway " + psQuote(addr.Gateway))
	}
	s.WriteString(" | Out-Null\n")
	if len(addr.DNS) > 0 {
		q := make([]string, len(addr.DNS))
		for i, d := range addr.DNS {
			q[i] = psQuote(d)
		}
		s.WriteString("  Set-DnsClientServerAddress -InterfaceIndex $nic.ifIndex -ServerAddresses @(" + strings.Join(q, ", ") + ")\n")
	}
	s.WriteString("}\n")
	return s.String(), nil
}
