package guest

import (
	"encoding/base64"
	"strings"
)

// Windows guest programs (docs/windows.md). A Windows guest runs no
// /bin/sh: the readiness probe and the worker script go through Windows
// PowerShell, which every supported Windows carries at this path.
const (
	// PowerShellProgram is the program a Windows guest runs.
	PowerShellProgram = `C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`
	// PowerShellProbeArgs make the readiness probe: PowerShell starting
	// and exiting at once.
	PowerShellProbeArgs = `-NoLogo -NoProfile -NonInteractive -Command exit 0`
	// ScriptEnv is the environment variable carrying the worker script
	// to a Windows guest, base64 of its UTF-8: the command line (which the
	// guest's process list shows) stays PowerShellLaunchArgs, the same for
	// every worker, with no token nor command of the model on it.
	ScriptEnv = "CDS_HATCHERY_SCRIPT"
	// PowerShellLaunchArgs run the script of ScriptEnv: decoded, the
	// variable removed from the process's environment (the worker does
	// not inherit it), then run as a script block.
	PowerShellLaunchArgs = `-NoLogo -NoProfile -NonInteractive -ExecutionPolicy Bypass -Command "` +
		`$s = [Text.Encoding]::UTF8.GetString([Convert]::FromBase64String($env:` + ScriptEnv + `)); ` +
		`Remove-Item -Path Env:` + ScriptEnv + `; ` +
		`& ([scriptblock]::Create($s))"`
)

// WindowsScript wraps the rendered worker script (Script) for a Windows
// guest: errors stop it, progress bars are off (they slow downloads
// down), and whatever happens the VM is powered off when the commands end
// (Stop-Computer in a finally block), as a Linux worker's post-command
// does. The result may hold the worker token: never log it.
func WindowsScript(script string) string {
	var b strings.Builder
	b.WriteString("$ErrorActionPreference = 'Stop'\n")
	b.WriteString("$ProgressPreference = 'SilentlyContinue'\n")
	b.WriteString("try {\n")
	b.WriteString(script)
	if !strings.HasSuffix(script, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("} finally {\n")
	b.WriteString("  Stop-Computer -Force\n")
	b.WriteString("}\n")
	return b.String()
}

// EncodeScript is the value of ScriptEnv for script: base64 of its UTF-8.
func EncodeScript(script string) string {
	return base64.StdEncoding.EncodeToString([]byte(script))
}

// DecodeScript reads a ScriptEnv value back (the fake guest's check).
func DecodeScript(v string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
