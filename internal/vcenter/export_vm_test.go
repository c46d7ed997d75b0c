package vcenter

// Hooks for the external (vcsim) VM tests, compiled into tests only.

// LoadVirtualMachineDevices is the adapter's device read (a reconfigure's
// disk growth reads it; no port method since the growth moved behind the
// adapter).
var LoadVirtualMachineDevices = (*Client).loadVirtualMachineDevices
