package config

import "slices"

// RedactedMask is the mask that replaces a secret in Redacted.
const RedactedMask = "***"

// Redacted returns a deep copy of c fit for printing or logging: every
// secret that is set (vCenter password, api.token, api.tokenV2,
// rsaPrivateKey, guest passwords) is replaced by "***"; unset ones stay
// empty so that the copy still shows what is missing.
func (c *Config) Redacted() Config {
	r := *c
	mask := func(s *string) {
		if *s != "" {
			*s = RedactedMask
		}
	}
	mask(&r.Password)
	mask(&r.CommonConfiguration.API.Token)
	mask(&r.CommonConfiguration.API.TokenV2)
	mask(&r.CommonConfiguration.RSAPrivateKey)
	r.CommonConfiguration.Provision.InjectEnvVars = slices.Clone(c.CommonConfiguration.Provision.InjectEnvVars)
	r.Networks = slices.Clone(c.Networks)
	r.WorkerProvisioning = slices.Clone(c.WorkerProvisioning)
	r.Flavors = slices.Clone(c.Flavors)
	r.GuestCredentials = slices.Clone(c.GuestCredentials)
	r.Models = slices.Clone(c.Models)
	for i := range r.GuestCredentials {
		mask(&r.GuestCredentials[i].Password)
	}
	for i := range r.Models {
		mask(&r.Models[i].Password)
	}
	r.DefaultWorkerModelsV2 = slices.Clone(c.DefaultWorkerModelsV2)
	for i := range r.DefaultWorkerModelsV2 {
		r.DefaultWorkerModelsV2[i].Binaries = slices.Clone(c.DefaultWorkerModelsV2[i].Binaries)
	}
	return r
}

// AllGuestCredentials returns the guest credentials of both spellings,
// guestCredentials first, then its alias models. Callers look
// credentials up here, not in either field alone.
func (c *Config) AllGuestCredentials() []GuestCredential {
	return append(slices.Clone(c.GuestCredentials), c.Models...)
}

// StaticNetworks returns the static IP ranges to hand addresses out from:
// the top-level iprange (with gateway, dns, subnetMask) when set, then every
// [[networks]] entry, whose empty gateway, dns or subnetMask fall back to
// the top-level values. Empty means DHCP (no static IPs).
func (c *Config) StaticNetworks() []Network {
	var out []Network
	if c.IPRange != "" {
		out = append(out, Network{IPRange: c.IPRange, Gateway: c.Gateway, DNS: c.DNS, SubnetMask: c.SubnetMask})
	}
	for _, n := range c.Networks {
		if n.Gateway == "" {
			n.Gateway = c.Gateway
		}
		if n.DNS == "" {
			n.DNS = c.DNS
		}
		if n.SubnetMask == "" {
			n.SubnetMask = c.SubnetMask
		}
		out = append(out, n)
	}
	return out
}
