package vsphere

// STUB — owned by the spawn-path work (issue 3): static IP pool.

// ipPool hands out static IPs from the configured ranges (001 §7).
type ipPool struct{}

// newIPPool parses the configured ranges; a config without range gives an
// empty pool (DHCP / template network settings).
func newIPPool(cfg *Configuration) (*ipPool, error) { return &ipPool{}, nil }
