package config

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// cardNames are the virtual NIC types govmomi can create (object.EthernetCardTypes).
var cardNames = []string{"e1000", "e1000e", "vmxnet", "vmxnet2", "vmxnet3", "vmxnet3vrdma", "pcnet32", "sriov"}

// Validate checks the configuration and returns every problem found as
// Errors (nil when there is none). Each problem names the full TOML key
// path, what is wrong and what is allowed; no message quotes a secret.
// Validate does no I/O.
func (c *Config) Validate() error {
	var es Errors
	c.validateCommon(&es)
	c.validateVCenter(&es)
	c.validateTemplateFolders(&es)
	c.validatePlacements(&es)
	c.validateNumbers(&es)
	if c.validateNetwork(&es) {
		c.validateIPPlan(&es)
	}
	c.validateFlavors(&es)
	c.validateProvisioning(&es)
	c.validateCredentials(&es)
	c.validateBootstrap(&es)
	c.validateCloneMode(&es)
	c.validateCommands(&es)
	c.validateV2Templates(&es)
	c.validateLatency(&es)
	c.validateQuarantine(&es)
	c.validateDebugHold(&es)
	c.validateWindows(&es)
	c.validateOperations(&es)
	if !slices.Contains(InventoryModes, c.InventoryMode) {
		es.add("inventoryMode", "%q is not an inventory mode (allowed: %q, %q, %q)", c.InventoryMode, InventoryWatch, InventoryShared, InventoryListing)
	}
	return es.scrub(c.secrets()).err()
}

// MaxNameWithStaticIPs bounds the hatchery's name when static IPs are
// configured: the address lock of 255.255.255.255 is named
// "<name>-ip-255.255.255.255", 19 characters more, and vSphere names hold
// at most 80. The lock name's shape is ippool's (LockPrefix), written again
// here because ippool imports this package; an ippool test ties the two.
const MaxNameWithStaticIPs = 80 - len("-ip-255.255.255.255")

func (c *Config) validateCommon(es *Errors) {
	cc := &c.CommonConfiguration
	const p = "commonConfiguration."
	if strings.TrimSpace(cc.Name) == "" {
		es.add(p+"name", "required: the hatchery's name, as registered in CDS")
	} else if c.IPRange != "" || len(c.Networks) > 0 {
		// Each static address is taken through a vCenter folder named
		// "<name>-ip-<address>" (docs/high-availability.md): the name
		// must fit vSphere's 80 characters with the longest address,
		// and hold none of the characters vCenter escapes in names.
		if n := len(cc.Name); n > MaxNameWithStaticIPs {
			es.add(p+"name", "%d characters: with static IPs (iprange, [[networks]]) at most %d, so that the address locks' names (<name>-ip-<address>) fit vSphere's 80", n, MaxNameWithStaticIPs)
		}
		if strings.ContainsAny(cc.Name, `%/\`) {
			es.add(p+"name", "%q: with static IPs (iprange, [[networks]]) it must not hold %%, / or \\ (vCenter escapes them in the address locks' folder names)", cc.Name)
		}
	}
	checkURL(es, p+"url", cc.URL, false, "the URL the CDS API reaches this hatchery's /mon endpoints at")
	checkURL(es, p+"api.http.url", cc.API.HTTP.URL, true, "the CDS API URL")
	checkURL(es, p+"cdn.url", cc.CDN.URL, false, "the CDN URL (empty: asked from the API)")
	checkHostPort(es, p+"cdn.tcp.url", cc.CDN.TCP.URL, "the CDN's TCP log address workers send their logs to (empty: asked from the API)")
	if cc.CDN.TCP.EnableTLS && cc.CDN.TCP.URL == "" {
		es.add(p+"cdn.tcp.enableTLS", "true without cdn.tcp.url: it applies to the configured address only (with cdn.tcp.url empty, the API's tcp_url_enable_tls is used)")
	}
	checkURL(es, p+"provision.workerApiHttp.url", cc.Provision.WorkerAPIHTTP.URL, false, "the CDS API URL as workers reach it (empty: api.http.url)")
	if cc.API.Token == "" && cc.API.TokenV2 == "" {
		es.add(p+"api.token", "required: at least one of api.token (V1 sign-in) or api.tokenV2 (V2 sign-in) must be set (or %s / %s, their %s form or a systemd credential)", EnvAPIToken, EnvAPITokenV2, EnvFileSuffix)
	}
	if cc.RSAPrivateKey == "" {
		es.add(p+"rsaPrivateKey", "required: a PEM RSA private key (PKCS#1 or PKCS#8) to sign worker tokens (or %s, %s%s or the systemd credential %s)", EnvRSAPrivateKey, EnvRSAPrivateKey, EnvFileSuffix, CredentialRSAPrivateKey)
	} else if problem := checkRSAKey(cc.RSAPrivateKey); problem != "" {
		es.add(p+"rsaPrivateKey", "%s (want a PEM RSA private key, PKCS#1 or PKCS#8; value not shown)", problem)
	}
	if cc.HTTP.Port < 0 || cc.HTTP.Port > 65535 {
		es.add(p+"http.port", "%d is out of range (allowed: 1-65535, or 0 for a free port chosen at start)", cc.HTTP.Port)
	}
	if cc.HTTP.Addr != "" {
		if _, err := netip.ParseAddr(cc.HTTP.Addr); err != nil && strings.ContainsAny(cc.HTTP.Addr, " :/") {
			es.add(p+"http.addr", "%q is not a listen address (want an IP such as 127.0.0.1, a host name, or empty for all interfaces)", cc.HTTP.Addr)
		}
	}
	if cc.API.MaxHeartbeatFailures <= 0 {
		es.add(p+"api.maxHeartbeatFailures", "%d: must be > 0 (consecutive failed heartbeats before the process stops)", cc.API.MaxHeartbeatFailures)
	}

	pv := &cc.Provision
	const pp = p + "provision."
	if pv.MaxWorker < 0 {
		es.add(pp+"maxWorker", "%d: must be >= 0 (0 = unlimited)", pv.MaxWorker)
	}
	if pv.MaxConcurrentProvisioning <= 0 {
		es.add(pp+"maxConcurrentProvisioning", "%d: must be > 0", pv.MaxConcurrentProvisioning)
	} else if pv.MaxWorker > 0 && pv.MaxConcurrentProvisioning > pv.MaxWorker {
		es.add(pp+"maxConcurrentProvisioning", "%d is greater than provision.maxWorker %d (must be <= maxWorker when maxWorker > 0)", pv.MaxConcurrentProvisioning, pv.MaxWorker)
	}
	if pv.MaxConcurrentRegistering < -1 {
		es.add(pp+"maxConcurrentRegistering", "%d: must be >= -1 (-1 disables model registration)", pv.MaxConcurrentRegistering)
	} else if pv.MaxWorker > 0 && pv.MaxConcurrentRegistering > pv.MaxWorker {
		es.add(pp+"maxConcurrentRegistering", "%d is greater than provision.maxWorker %d (must be <= maxWorker when maxWorker > 0; -1 disables registration)", pv.MaxConcurrentRegistering, pv.MaxWorker)
	}
	if pv.MaxAttemptsNumberBeforeFailure < -1 {
		es.add(pp+"maxAttemptsNumberBeforeFailure", "%d: must be >= -1 (-1 disables the cap)", pv.MaxAttemptsNumberBeforeFailure)
	}
	for i, v := range pv.InjectEnvVars {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			es.add(fmt.Sprintf(pp+"injectEnvVars[%d]", i), "entry is not NAME=value")
		}
	}
}

func (c *Config) validateVCenter(es *Errors) {
	if problem := checkEndpoint(c.Endpoint); problem != "" {
		es.add("endpoint", "%s", problem)
	}
	if strings.TrimSpace(c.User) == "" {
		es.add("user", "required: the vCenter user")
	}
	if c.Password == "" {
		es.add("password", "required: the vCenter password (or %s, %s%s or the systemd credential %s)", EnvPassword, EnvPassword, EnvFileSuffix, CredentialPassword)
	}
	if strings.TrimSpace(c.DatacenterString) == "" {
		es.add("datacenterString", "required: the vSphere datacenter name")
	}
	ok := false
	for _, n := range cardNames {
		ok = ok || c.CardName == n
	}
	if !ok {
		es.add("cardName", "%q is not a network card type (allowed: %s)", c.CardName, strings.Join(cardNames, ", "))
	}
}

func (c *Config) validateNumbers(es *Errors) {
	positive := []struct {
		key  string
		v    int
		unit string
	}{
		{"workerProvisioningPoolSize", c.WorkerProvisioningPoolSize, "parallel provisioning operations"},
		{"maxConcurrentTasks", c.MaxConcurrentTasks, "vCenter tasks in flight"},
	}
	for _, d := range durationKeys {
		if v := d.value(c); v <= 0 || v > d.max {
			es.add(d.key, "%d is out of range: must be > 0 (%s) and at most %d (allowed: 1-%d %s)", v, d.unitName, d.max, d.max, d.unitName)
		}
	}
	for _, n := range positive {
		if n.v <= 0 {
			es.add(n.key, "%d: must be > 0 (%s)", n.v, n.unit)
		}
	}
	if c.MaxCPUs < 0 {
		es.add("maxCpus", "%d: must be >= 0 (0 = no static vCPU limit)", c.MaxCPUs)
	}
	if c.MaxMemoryMB < 0 {
		es.add("maxMemoryMB", "%d: must be >= 0 (0 = no static memory limit)", c.MaxMemoryMB)
	}
	if c.CountSmallerFlavorToKeep < 0 {
		es.add("countSmallerFlavorToKeep", "%d: must be >= 0 (0 = no reserve)", c.CountSmallerFlavorToKeep)
	}
}

// ipSet is one parsed range, for the overlap check.
type ipSet struct {
	key   string
	addrs []netip.Addr
}

// validateNetwork checks every range, gateway, DNS and mask and that ranges
// do not overlap; it returns false when it stopped early because the ranges
// are too large to check further.
func (c *Config) validateNetwork(es *Errors) bool {
	var sets []ipSet
	checkRangeSet(es, "", Network{IPRange: c.IPRange, Gateway: c.Gateway, DNS: c.DNS, SubnetMask: c.SubnetMask}, &sets)
	total := func() int {
		n := 0
		for _, s := range sets {
			n += len(s.addrs)
		}
		return n
	}
	for i, n := range c.Networks {
		if total() > maxIPRangeAddresses {
			// Bounds the work (and memory) of a hostile or mistaken file.
			es.add("networks", "the static ranges hold more than %d addresses together (one hatchery never needs that many); entries from networks[%d] on are not checked", maxIPRangeAddresses, i)
			return false
		}
		prefix := fmt.Sprintf("networks[%d].", i)
		if strings.TrimSpace(n.IPRange) == "" {
			es.add(prefix+"iprange", "required: each [[networks]] entry needs an iprange (a.a.a.a/b,c.c.c.c/e)")
		}
		checkRangeSet(es, prefix, n, &sets)
	}
	// Overlaps: report each later range against the first one it meets.
	owner := map[netip.Addr]string{}
	for _, s := range sets {
		for _, a := range s.addrs {
			if prev, ok := owner[a]; ok {
				es.add(s.key, "overlaps %s (address %s is in both; ranges must be disjoint)", prev, a)
				break
			}
		}
		for _, a := range s.addrs {
			if _, ok := owner[a]; !ok {
				owner[a] = KeyPrefix + "." + s.key
			}
		}
	}
	return true
}

// checkRangeSet checks one iprange with its gateway, dns and mask.
func checkRangeSet(es *Errors, prefix string, n Network, sets *[]ipSet) {
	if n.IPRange != "" {
		addrs, err := ParseIPRange(n.IPRange)
		if err != nil {
			es.add(prefix+"iprange", "%v", err)
		} else {
			*sets = append(*sets, ipSet{key: prefix + "iprange", addrs: addrs})
		}
	}
	checkIPv4(es, prefix+"gateway", n.Gateway)
	for i, d := range SplitList(n.DNS) {
		key := prefix + "dns"
		if len(SplitList(n.DNS)) > 1 {
			key = fmt.Sprintf("%s[%d]", key, i)
		}
		checkIPv4(es, key, d)
	}
	if n.SubnetMask != "" {
		if problem := checkMask(n.SubnetMask); problem != "" {
			es.add(prefix+"subnetMask", "%s", problem)
		}
	}
}

// SplitList splits a comma-separated setting (dns, for one), dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func checkIPv4(es *Errors, key, v string) {
	if v == "" {
		return
	}
	a, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil || !a.Is4() {
		es.add(key, "%q is not an IPv4 address (want e.g. 192.168.1.1)", v)
	}
}

// checkMask returns what is wrong with a dotted IPv4 subnet mask, "" if nothing.
func checkMask(v string) string {
	a, err := netip.ParseAddr(v)
	if err != nil || !a.Is4() {
		return fmt.Sprintf("%q is not an IPv4 subnet mask (want e.g. 255.255.255.0)", v)
	}
	b := a.As4()
	m := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	inv := ^m // a contiguous mask inverted is 2^k-1
	if m == 0 || inv&(inv+1) != 0 {
		return fmt.Sprintf("%q is not a contiguous subnet mask (want leading one bits then zero bits, e.g. 255.255.255.0 or 255.255.252.0)", v)
	}
	return ""
}

func (c *Config) validateFlavors(es *Errors) {
	seen := map[string]int{}
	for i, f := range c.Flavors {
		key := fmt.Sprintf("flavors[%d]", i)
		name := FlavorName(f.Name)
		label := ""
		if name != "" {
			label = fmt.Sprintf("flavor %q: ", name)
		}
		switch {
		case name == "":
			es.add(key+".name", "required: every flavor needs a non-empty name")
		case strings.TrimSpace(f.Name) != f.Name:
			es.add(key+".name", "%q has surrounding spaces (want a plain name such as \"small\")", f.Name)
		}
		if name != "" {
			if j, dup := seen[name]; dup {
				es.add(key+".name", "%sduplicate of flavors[%d] (names are case-insensitive and must be unique)", label, j)
			} else {
				seen[name] = i
			}
		}
		if f.CPUs <= 0 {
			es.add(key+".cpus", "%s%d: must be > 0 (vCPUs)", label, f.CPUs)
		} else if c.MaxCPUs > 0 && int(f.CPUs) > c.MaxCPUs {
			es.add(key+".cpus", "%s%d vCPUs is more than maxCpus %d: the flavor could never be spawned", label, f.CPUs, c.MaxCPUs)
		}
		if f.MemoryMB <= 0 {
			es.add(key+".memoryMB", "%s%d: must be > 0 (MB of RAM)", label, f.MemoryMB)
		} else if c.MaxMemoryMB > 0 && f.MemoryMB > c.MaxMemoryMB {
			es.add(key+".memoryMB", "%s%d MB is more than maxMemoryMB %d: the flavor could never be spawned", label, f.MemoryMB, c.MaxMemoryMB)
		}
		if f.DiskSizeGB < 0 {
			es.add(key+".diskSizeGB", "%s%d: must be >= 0 (GB; 0 keeps the template's disk, a larger size only grows it)", label, f.DiskSizeGB)
		}
	}
	if c.DefaultFlavor != "" && !c.hasFlavor(c.DefaultFlavor) {
		es.add("defaultFlavor", "%q is not a defined flavor (defined: %s)", c.DefaultFlavor, c.flavorNames())
	}
}

// hasFlavor reports whether name (case-insensitive) is a defined flavor.
func (c *Config) hasFlavor(name string) bool {
	for _, f := range c.Flavors {
		if FlavorName(f.Name) == FlavorName(name) {
			return true
		}
	}
	return false
}

// flavorNames lists the defined flavor names for messages.
func (c *Config) flavorNames() string {
	if len(c.Flavors) == 0 {
		return "none; define [[hatchery.vsphere.flavors]]"
	}
	names := make([]string, len(c.Flavors))
	for i, f := range c.Flavors {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func (c *Config) validateProvisioning(es *Errors) {
	type pair struct{ model, flavor string }
	seen := map[pair]int{}
	for i, w := range c.WorkerProvisioning {
		key := fmt.Sprintf("workerProvisioning[%d]", i)
		model := checkModelRef(es, key, w.ModelPath, w.ModelVMWare)
		if w.Number < 0 {
			es.add(key+".number", "%d: must be >= 0 (VMs kept pre-provisioned)", w.Number)
		}
		w.validateScaling(es, key)
		flavor := FlavorName(w.Flavor)
		if flavor != "" && !c.hasFlavor(flavor) {
			es.add(key+".flavor", "%q is not a defined flavor (defined: %s; empty keeps the VMs neutral)", w.Flavor, c.flavorNames())
		}
		switch w.State() {
		case IdleStatePoweredOff, IdleStateSuspended, IdleStatePoweredOn:
			if w.Hot() && flavor == "" {
				es.add(key+".flavor", "required when idleState is %q: a suspended or running VM cannot be resized, so the pool is pre-sized to a flavor (defined: %s)", w.IdleState, c.flavorNames())
			}
			if w.Hot() && c.poolBootstrap(w) == BootstrapCloudInit {
				es.add(key+".idleState", "%q: the model starts with cloud-init, whose userdata is read at first boot, which a suspended or running VM has passed; use %q", w.IdleState, IdleStatePoweredOff)
			}
		default:
			es.add(key+".idleState", "%q: must be %q (default), %q or %q", w.IdleState, IdleStatePoweredOff, IdleStateSuspended, IdleStatePoweredOn)
		}
		if model == "" {
			continue
		}
		p := pair{model, flavor}
		if j, dup := seen[p]; dup {
			es.add(key, "duplicate of workerProvisioning[%d] (same model and flavor; merge them into one entry with the total number)", j)
		} else {
			seen[p] = i
		}
	}
	for i, d := range c.DefaultWorkerModelsV2 {
		if strings.TrimSpace(d.WorkerModelV2) == "" {
			es.add(fmt.Sprintf("defaultWorkerModelsV2[%d].workerModelV2", i), "required: the V2 worker model to use")
		}
	}
}

// checkModelRef checks that exactly one of modelPath / modelVMWare is set
// and returns a key identifying the model ("" when invalid).
func checkModelRef(es *Errors, key, modelPath, modelVMWare string) string {
	modelPath, modelVMWare = strings.TrimSpace(modelPath), strings.TrimSpace(modelVMWare)
	switch {
	case modelPath == "" && modelVMWare == "":
		es.add(key, "needs a model: set exactly one of modelPath (V1, \"group/model\") or modelVMWare (V2, a template name)")
		return ""
	case modelPath != "" && modelVMWare != "":
		es.add(key, "sets both modelPath and modelVMWare: set exactly one (modelPath for a V1 model, modelVMWare for a V2 template)")
		return ""
	case modelPath != "":
		if g, m, ok := strings.Cut(modelPath, "/"); !ok || g == "" || m == "" || strings.Contains(m, "/") {
			es.add(key+".modelPath", "%q is not a V1 model path (want \"group/model\")", modelPath)
			return ""
		}
		return "v1:" + modelPath
	default:
		return "v2:" + modelVMWare
	}
}

func (c *Config) validateCredentials(es *Errors) {
	seen := map[string]string{}
	for key, g := range c.credentialEntries() {
		model := checkModelRef(es, key, g.ModelPath, g.ModelVMWare)
		if strings.TrimSpace(g.Username) == "" && c.needsGuestAccount(g) {
			es.add(key+".username", "required: the guest OS account the worker runs as")
		}
		if model == "" {
			continue
		}
		if prev, dup := seen[model]; dup {
			es.add(key, "duplicate credentials for the model of %s (one entry per model; models is an alias of guestCredentials)", prev)
		} else {
			seen[model] = KeyPrefix + "." + key
		}
	}
}

// checkURL checks that v is an absolute http(s) URL; empty is a problem
// only when required.
func checkURL(es *Errors, key, v string, required bool, what string) {
	if v == "" {
		if required {
			es.add(key, "required: %s (e.g. https://cds-api.example.com)", what)
		}
		return
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		es.add(key, "%q is not an absolute http(s) URL: %s", v, what)
	}
}

// checkHostPort reports a non-empty v that is not host:port with a port in
// 1-65535.
func checkHostPort(es *Errors, key, v, what string) {
	if v == "" {
		return
	}
	host, port, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		es.add(key, "%q is not host:port (e.g. cdn.example.com:8090, no scheme): %s", v, what)
	}
}

// checkRSAKey returns what is wrong with a PEM RSA private key, "" if
// nothing. The message never quotes the key.
func checkRSAKey(s string) string {
	block, rest := pem.Decode([]byte(strings.TrimSpace(s)))
	if block == nil {
		return "not PEM (no -----BEGIN ... PRIVATE KEY----- block found)"
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return "trailing data after the PEM block"
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			return "the RSA PRIVATE KEY block does not parse as PKCS#1"
		}
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return "the PRIVATE KEY block does not parse as PKCS#8"
		}
		if _, ok := k.(*rsa.PrivateKey); !ok {
			return fmt.Sprintf("the PKCS#8 key is %T, not RSA", k)
		}
	default:
		return fmt.Sprintf("PEM block type %q is not an RSA private key", block.Type)
	}
	return ""
}

// secrets returns the secret values held by c, for scrubbing messages.
func (c *Config) secrets() []string {
	out := []string{c.Password, c.CommonConfiguration.API.Token, c.CommonConfiguration.API.TokenV2, c.CommonConfiguration.RSAPrivateKey}
	for _, g := range c.GuestCredentials {
		out = append(out, g.Password)
	}
	for _, g := range c.Models {
		out = append(out, g.Password)
	}
	return out
}
