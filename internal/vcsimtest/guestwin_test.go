package vcsimtest

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// TestCheckWindows: the fake Windows guest runs PowerShell only, takes a
// launch whose config and script are in its environment, and refuses one
// whose command line holds the config, the token or the script.
func TestCheckWindows(t *testing.T) {
	t.Parallel()
	const ps = `C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`
	cfg := spawn.WorkerConfig{Name: "w", APIToken: "tok-secret"}
	enc := cfg.EncodeBase64()
	script := base64.StdEncoding.EncodeToString([]byte("& .\\worker.exe"))
	run := `-Command "& ([scriptblock]::Create($env:CDS_HATCHERY_SCRIPT))"`
	env := []string{"CDS_CONFIG=" + enc, windowsScriptEnv + "=" + script}
	for _, tc := range []struct {
		name   string
		spec   *types.GuestProgramSpec
		launch bool
		fault  string
	}{
		{name: "probe", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: "-Command exit 0"}},
		{name: "launch", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: run, EnvVariables: env}, launch: true},
		{name: "no shell", spec: &types.GuestProgramSpec{ProgramPath: "/usr/bin/env"}, fault: "FileNotFound"},
		{name: "no config", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: run, EnvVariables: env[1:]}, fault: "without CDS_CONFIG"},
		{name: "no script", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: run, EnvVariables: env[:1]}, fault: "without " + windowsScriptEnv},
		{name: "token on the line", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: run + " tok-secret", EnvVariables: env}, fault: "the worker token"},
		{name: "config on the line", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: run + " " + enc, EnvVariables: env}, fault: "CDS_CONFIG"},
		{name: "script not run", spec: &types.GuestProgramSpec{ProgramPath: ps, Arguments: "-Command exit 0", EnvVariables: env}, fault: "does not run the script"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, fault := checkWindows("vm", tc.spec)
			if tc.fault != "" {
				require.NotNil(t, fault)
				if se, ok := fault.(*types.SystemError); ok {
					assert.Contains(t, se.Reason, tc.fault)
				} else {
					assert.IsType(t, &types.FileNotFound{}, fault)
				}
				assert.Nil(t, l)
				return
			}
			require.Nil(t, fault)
			if !tc.launch {
				assert.Nil(t, l)
				return
			}
			require.NotNil(t, l)
			assert.Equal(t, cfg, l.Config)
			assert.Equal(t, "& .\\worker.exe", l.Script)
		})
	}
}
