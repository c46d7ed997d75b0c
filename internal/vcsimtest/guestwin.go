package vcsimtest

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Windows guests. vcsim runs no guest, and its guest process manager
// knows nothing of guest operating systems: what a Windows guest accepts
// is this test code's extension of the simulator (FakeGuest), not
// vcsim's.
const (
	// WindowsGuestID is the guest id of a Windows template
	// (Template.GuestID): vcsim reports its guest family as
	// WindowsGuestFamily, as vCenter does.
	WindowsGuestID = "windows2019srv_64Guest"
	// WindowsGuestFamily is guest.guestFamily of a Windows VM.
	WindowsGuestFamily = string(types.VirtualMachineGuestOsFamilyWindowsGuest)
	// windowsScriptEnv is the environment variable a Windows launch
	// carries its script in (internal/guest's ScriptEnv, written again
	// here: the fake plays the guest, it does not import the hatchery).
	windowsScriptEnv = "CDS_HATCHERY_SCRIPT"
)

// WindowsLaunch is what a Windows guest ran for a worker launch, as the
// fake decoded it from the call's environment.
type WindowsLaunch struct {
	// VM is the VM's name.
	VM string
	// Script is the PowerShell script the launch ran (decoded from
	// its environment).
	Script string
	// Config is the worker config of its CDS_CONFIG.
	Config spawn.WorkerConfig
}

// isPowerShell tells whether path is Windows PowerShell or PowerShell 7,
// the programs a Windows guest runs scripts with.
func isPowerShell(path string) bool {
	p := strings.ToLower(path)
	return strings.HasSuffix(p, `\powershell.exe`) || strings.HasSuffix(p, `\pwsh.exe`)
}

// checkWindows is what a Windows guest checks of a program start, beyond
// a Linux one's: the program is PowerShell (a Windows guest has no
// /usr/bin/env nor /bin/echo: a FileNotFound, as vCenter answers for a
// missing program); a start carrying an environment is a worker launch,
// which must carry CDS_CONFIG (a valid worker config) and its script in
// windowsScriptEnv, and whose command line (what the guest's process list
// and vCenter show) holds neither the config, its token, nor the script.
// It returns the decoded launch (nil for a probe) or the fault.
func checkWindows(vm string, spec *types.GuestProgramSpec) (*WindowsLaunch, types.BaseMethodFault) {
	if spec == nil || !isPowerShell(spec.ProgramPath) {
		path := ""
		if spec != nil {
			path = spec.ProgramPath
		}
		return nil, &types.FileNotFound{FileFault: types.FileFault{File: path}}
	}
	if len(spec.EnvVariables) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, kv := range spec.EnvVariables {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	bad := func(format string, args ...any) (*WindowsLaunch, types.BaseMethodFault) {
		return nil, &types.SystemError{Reason: "windows guest: " + fmt.Sprintf(format, args...)}
	}
	raw, ok := env["CDS_CONFIG"]
	if !ok {
		return bad("launch without CDS_CONFIG in its environment")
	}
	cfg, err := spawn.DecodeWorkerConfig(raw)
	if err != nil {
		return bad("CDS_CONFIG: %v", err)
	}
	enc, ok := env[windowsScriptEnv]
	if !ok {
		return bad("launch without %s in its environment", windowsScriptEnv)
	}
	script, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return bad("%s: %v", windowsScriptEnv, err)
	}
	line := spec.ProgramPath + " " + spec.Arguments
	for what, secret := range map[string]string{"CDS_CONFIG": raw, "the worker token": cfg.APIToken, "the script": enc} {
		if secret != "" && strings.Contains(line, secret) {
			return bad("the command line holds %s", what)
		}
	}
	if !strings.Contains(spec.Arguments, "$env:"+windowsScriptEnv) {
		return bad("the command line does not run the script of %s", windowsScriptEnv)
	}
	return &WindowsLaunch{VM: vm, Script: string(script), Config: cfg}, nil
}

// WindowsLaunches returns the worker launches Windows guests accepted,
// oldest first.
func (f *FakeGuest) WindowsLaunches() []WindowsLaunch { return f.winLaunches.all() }
