package config

import (
	"slices"
	"strings"
	"time"

	"github.com/cds-contrib/hatchery-vsphere/sdk"
	"github.com/cds-contrib/hatchery-vsphere/sdk/hatchery"
)

// Guest operating systems of a model (guestCredentials[].os,
// docs/windows.md).
const (
	// OSLinux is the default: Linux customization, the worker started
	// through /bin/sh, cloud-init for the guestinfo bootstrap.
	OSLinux = "linux"
	// OSWindows: sysprep customization, the worker started with
	// PowerShell, cloudbase-init for the guestinfo bootstrap.
	OSWindows = "windows"
)

// OSes lists the allowed os values ("" is OSLinux).
var OSes = []string{OSLinux, OSWindows}

// Default readiness bounds of a Windows guest (seconds): sysprep's
// specialize pass and its reboots come before VMware Tools run.
const (
	DefaultWindowsGuestOpsTimeout = 900
	DefaultWindowsIPTimeout       = 600
	DefaultWindowsEnvTimeout      = 180
)

// MaxWindowsReadinessTimeout bounds each Windows readiness key (seconds):
// one hour.
const MaxWindowsReadinessTimeout = 3600

// The default V2 commands of a Windows model (an entry with os =
// "windows" and no V2 commands of its own): PowerShell, run by the
// launch script (internal/guest, WindowsScript) which powers the VM off
// once they end. The worker is the API's windows/amd64 build, saved as
// worker.exe in the temporary directory of the account running it.
const (
	// DefaultWindowsV2PreCmd downloads worker.exe (retried).
	DefaultWindowsV2PreCmd = `Set-Location -Path $env:TEMP
{{if .HTTPInsecure}}[System.Net.ServicePointManager]::ServerCertificateValidationCallback = { $true }
{{end}}[Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
for ($i = 1; ; $i++) { try { Invoke-WebRequest -UseBasicParsing -Uri "{{.API}}/download/worker/windows/amd64" -OutFile .\worker.exe; break } catch { if ($i -ge 10) { throw }; Start-Sleep -Seconds 10 } }`
	// DefaultWindowsV2Cmd runs it.
	DefaultWindowsV2Cmd = `& .\worker.exe`
	// DefaultWindowsV2PostCmd is empty: the launch script powers the VM
	// off after the commands (Stop-Computer).
	DefaultWindowsV2PostCmd = ""
)

// WindowsV2Commands are the default V2 commands of a Windows model.
func WindowsV2Commands() hatchery.V2Commands {
	return hatchery.V2Commands{PreCmd: DefaultWindowsV2PreCmd, Cmd: DefaultWindowsV2Cmd, PostCmd: DefaultWindowsV2PostCmd}
}

// entryOS is the os of an entry, OSLinux when unset.
func entryOS(g GuestCredential) string {
	if o := strings.TrimSpace(g.OS); o != "" {
		return o
	}
	return OSLinux
}

// OSOf is the guest OS of model: its guestCredentials/models entry's os,
// else OSLinux.
func (c *Config) OSOf(model sdk.WorkerStarterWorkerModel) string {
	if e := c.ModelEntry(model); e != nil {
		return entryOS(*e)
	}
	return OSLinux
}

// IsWindows tells whether model's workers run Windows.
func (c *Config) IsWindows(model sdk.WorkerStarterWorkerModel) bool {
	return c.OSOf(model) == OSWindows
}

// OSOfRecord is the guest OS of the VMs whose ownership record names
// v1ModelPath (a V1 model) or template (a V2 model's template): the os of
// the entry matching either, else OSLinux. The clone specification reads
// it, for a worker's clone and a warm-pool VM's alike.
func (c *Config) OSOfRecord(v1ModelPath, template string) string {
	for _, g := range c.credentialEntriesInOrder() {
		if (v1ModelPath != "" && g.ModelPath == v1ModelPath) || (template != "" && g.ModelVMWare == template) {
			return entryOS(g)
		}
	}
	return OSLinux
}

// credentialEntriesInOrder is every entry, guestCredentials then models.
func (c *Config) credentialEntriesInOrder() []GuestCredential {
	return append(append([]GuestCredential(nil), c.GuestCredentials...), c.Models...)
}

// WindowsReadiness are the readiness bounds of a Windows guest:
// windowsGuestOpsTimeout, windowsIPTimeout and windowsEnvTimeout.
type WindowsReadiness struct {
	// GuestOps bounds the wait for guest operations (tools running).
	GuestOps time.Duration
	// IP bounds the wait for the guest's IPv4 address.
	IP time.Duration
	// Env bounds the retries of the first program started in the guest.
	Env time.Duration
}

// WindowsReadinessTimeouts converts the Windows readiness keys (seconds;
// durationKeys: 0 gives the default, Validate refuses values out of range).
func (c *Config) WindowsReadinessTimeouts() WindowsReadiness {
	return WindowsReadiness{
		GuestOps: c.duration("windowsGuestOpsTimeout"),
		IP:       c.duration("windowsIPTimeout"),
		Env:      c.duration("windowsEnvTimeout"),
	}
}

// validateWindows checks every entry's os (the readiness keys are
// durationKeys, checked with the other durations).
func (c *Config) validateWindows(es *Errors) {
	for key, g := range c.credentialEntries() {
		if o := strings.TrimSpace(g.OS); o != "" && !slices.Contains(OSes, o) {
			es.add(key+".os", "%q is not an os (allowed: %q, %q, or empty for %q)", o, OSLinux, OSWindows, OSLinux)
		}
	}
}
