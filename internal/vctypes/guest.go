package vctypes

// ToolsStatus is what vCenter says of a guest's VMware Tools
// (guest.toolsStatus), with vSphere's values; "" when it says nothing
// (a VM never powered on).
type ToolsStatus string

// The statuses of a guest's VMware Tools.
const (
	// ToolsNotInstalled: the guest has no VMware Tools; vCenter runs no
	// program in it, customizes it not, and reads no address of it.
	ToolsNotInstalled ToolsStatus = "toolsNotInstalled"
	// ToolsNotRunning: installed, not running (yet).
	ToolsNotRunning ToolsStatus = "toolsNotRunning"
	// ToolsOld: running, older than the host's.
	ToolsOld ToolsStatus = "toolsOld"
	// ToolsOK: running and current.
	ToolsOK ToolsStatus = "toolsOk"
)
