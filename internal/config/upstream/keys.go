// Package upstream owns what this hatchery knows of the upstream CDS
// vSphere hatchery's configuration file (docs/coexistence.md): the table of
// every key of upstream's [hatchery.vsphere] and what this hatchery does
// with each (Keys), the decoding of the keys only upstream has and of a
// CDS engine file's other sections (Decode, Pass.FilterUnknown), and the
// report of what was done with a file's upstream forms (Report), which
// `config check` prints and the daemon logs at start.
//
// It does not own this hatchery's configuration: internal/config, the
// only importer, decodes the native keys, calls the pass, and maps the
// upstream-only keys, upstream's 0 and its placeholder entries onto its
// Config (config_upstream.go there). It imports no project package.
package upstream

import (
	"slices"
	"strings"
)

// KeyPrefix is the table of a CDS engine file holding the vSphere
// hatchery's configuration, upstream's name, which this hatchery keeps
// for its own (internal/config's KeyPrefix is this).
const KeyPrefix = "hatchery.vsphere"

// Action is what this hatchery does with one upstream key.
type Action string

// The actions.
const (
	// Kept: the same key with the same meaning.
	Kept Action = "kept"
	// ZeroDefault: kept; 0, upstream's "the default", gives this
	// hatchery's default.
	ZeroDefault Action = "kept, 0 is the default"
	// Mapped: read into another key of this hatchery.
	Mapped Action = "mapped"
	// WorkerLog: handed to the workers in their configuration.
	WorkerLog Action = "passed to the workers"
	// Honoured: no key of this hatchery, but used with upstream's
	// meaning (internal/config's Config.OSArch).
	Honoured Action = "honoured"
	// Unused: accepted, no effect here.
	Unused Action = "accepted, unused"
)

// Key is one key of upstream's [hatchery.vsphere] at the CDS commit the
// conformance suite's peer is built from (the one named in the header of
// testdata/upstream-engine-vsphere.toml): its path relative to KeyPrefix
// (array elements "[]"), what this hatchery does with it, the key it maps
// to, and why.
type Key struct {
	Path   string
	Action Action
	Target string // Mapped: the key of this hatchery (relative to KeyPrefix)
	Why    string
}

// keys lists every key of upstream's [hatchery.vsphere]; the keys
// `engine config new hatchery:vsphere` writes are checked against it
// (testdata/upstream-engine-vsphere.toml).
var keys = []Key{
	{Path: "commonConfiguration.name", Action: Kept},
	{Path: "commonConfiguration.osArch", Action: Honoured, Why: "the os/arch of the V2 jobs the queue listing asks the API for; empty asks for none, and the API lists linux/amd64 jobs"},
	{Path: "commonConfiguration.rsaPrivateKey", Action: Kept},
	{Path: "commonConfiguration.url", Action: Kept},
	{Path: "commonConfiguration.http.addr", Action: Kept},
	{Path: "commonConfiguration.http.port", Action: Kept},
	{Path: "commonConfiguration.http.headerXForwardedFor", Action: Unused, Why: "/mon logs no client address, so there is no forwarded address to read"},
	{Path: "commonConfiguration.api.http.url", Action: Kept},
	{Path: "commonConfiguration.api.http.insecure", Action: Kept},
	{Path: "commonConfiguration.api.token", Action: Kept},
	{Path: "commonConfiguration.api.tokenV2", Action: Kept},
	{Path: "commonConfiguration.api.requestTimeout", Action: Kept},
	{Path: "commonConfiguration.api.maxHeartbeatFailures", Action: Kept},
	{Path: "commonConfiguration.cdn.url", Action: Kept, Why: "the CDN the workers reach (this hatchery sends nothing to the CDN itself)"},
	{Path: "commonConfiguration.cdn.tcp.url", Action: Kept},
	{Path: "commonConfiguration.cdn.tcp.enableTLS", Action: Kept},
	{Path: "commonConfiguration.provision.disableV2QueuePolling", Action: Mapped, Target: "disableV2QueuePolling"},
	{Path: "commonConfiguration.provision.injectEnvVars", Action: Kept},
	{Path: "commonConfiguration.provision.maxWorker", Action: Kept},
	{Path: "commonConfiguration.provision.maxConcurrentProvisioning", Action: Kept},
	{Path: "commonConfiguration.provision.maxConcurrentRegistering", Action: Kept},
	{Path: "commonConfiguration.provision.registerFrequency", Action: Kept},
	{Path: "commonConfiguration.provision.region", Action: Kept},
	{Path: "commonConfiguration.provision.ignoreJobWithNoRegion", Action: Kept},
	{Path: "commonConfiguration.provision.workerApiHttp.url", Action: Kept},
	{Path: "commonConfiguration.provision.workerApiHttp.insecure", Action: Kept},
	{Path: "commonConfiguration.provision.workerCdn.url", Action: Mapped, Target: "commonConfiguration.cdn.url", Why: "set, it is the workers' CDN, as upstream gives it to its workers before commonConfiguration.cdn.url"},
	{Path: "commonConfiguration.provision.workerCdn.tcp.url", Action: Mapped, Target: "commonConfiguration.cdn.tcp.url", Why: "set, it is the workers' CDN log address, before commonConfiguration.cdn.tcp.url"},
	{Path: "commonConfiguration.provision.workerCdn.tcp.enableTLS", Action: Mapped, Target: "commonConfiguration.cdn.tcp.enableTLS", Why: "with workerCdn.tcp.url only, as upstream pairs them"},
	{Path: "commonConfiguration.provision.workerBasedir", Action: Kept},
	{Path: "commonConfiguration.provision.workerLogsOptions.level", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.host", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.port", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.protocol", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.extraKey", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.extraValue", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.host", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.port", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.protocol", Action: WorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.extraTag", Action: WorkerLog},
	{Path: "commonConfiguration.provision.maxAttemptsNumberBeforeFailure", Action: Kept},
	{Path: "commonConfiguration.logOptions.spawnOptions.thresholdWarning", Action: Mapped, Target: "slowStartThreshold", Why: "a job whose worker starts later than this after it was queued gets a spawn info saying where the time went (unless slowStartThreshold is set)"},
	{Path: "commonConfiguration.logOptions.spawnOptions.thresholdCritical", Action: Unused, Why: "one slow-start threshold here (slowStartThreshold, which thresholdWarning sets); upstream's code at that commit reads neither"},
	{Path: "user", Action: Kept},
	{Path: "endpoint", Action: Kept},
	{Path: "password", Action: Kept},
	{Path: "datacenterString", Action: Kept},
	{Path: "datastoreString", Action: Kept},
	{Path: "networkString", Action: Kept},
	{Path: "cardName", Action: Kept},
	{Path: "iprange", Action: Kept},
	{Path: "gateway", Action: Kept},
	{Path: "dns", Action: Kept},
	{Path: "subnetMask", Action: Kept},
	{Path: "networks[].iprange", Action: Kept},
	{Path: "networks[].gateway", Action: Kept},
	{Path: "networks[].subnetMask", Action: Kept},
	{Path: "workerTTL", Action: ZeroDefault},
	{Path: "workerRegistrationTTL", Action: ZeroDefault},
	{Path: "workerProvisioningInterval", Action: ZeroDefault},
	{Path: "killAwolServersInterval", Action: ZeroDefault, Why: "upstream's default is 60 s"},
	{Path: "finishedWorkerGracePeriod", Action: ZeroDefault, Why: "upstream's default is 180 s; here the default, 0, destroys a finished worker's VM at the next cleanup pass"},
	{Path: "workerProvisioningPoolSize", Action: ZeroDefault, Why: "upstream's 0 clones without a bound; here pool clones are bounded by this and by maxConcurrentTasks"},
	{Path: "workerProvisioning[].modelVMWare", Action: Kept},
	{Path: "workerProvisioning[].number", Action: Kept},
	{Path: "guestCredentials[].modelVMWare", Action: Kept},
	{Path: "guestCredentials[].username", Action: Kept},
	{Path: "guestCredentials[].password", Action: Kept},
	{Path: "models[].modelVMWare", Action: Kept},
	{Path: "models[].username", Action: Kept},
	{Path: "models[].password", Action: Kept},
	{Path: "models[].preStartScript", Action: Kept},
	{Path: "defaultWorkerModelsV2[].workerModelV2", Action: Kept},
	{Path: "defaultWorkerModelsV2[].binaries", Action: Kept},
	{Path: "maxCpus", Action: Kept},
	{Path: "maxMemoryMB", Action: Kept},
	{Path: "flavors[].name", Action: Kept},
	{Path: "flavors[].cpus", Action: Kept},
	{Path: "flavors[].memoryMB", Action: Kept},
	{Path: "flavors[].diskSizeGB", Action: Kept},
	{Path: "defaultFlavor", Action: Kept},
	{Path: "countSmallerFlavorToKeep", Action: Kept},
}

// Keys returns upstream's [hatchery.vsphere] keys and what this hatchery
// does with each.
func Keys() []Key { return slices.Clone(keys) }

// Lookup finds an upstream key by its path relative to KeyPrefix as TOML
// metadata writes it (no array markers: "networks.iprange").
func Lookup(rel string) (Key, bool) {
	for _, u := range keys {
		if strings.ReplaceAll(u.Path, "[]", "") == rel {
			return u, true
		}
	}
	return Key{}, false
}

// Note is one line of a Report: a key (with KeyPrefix, or a section name)
// and what this hatchery does with it.
type Note struct {
	Key  string
	What string
}

// String is "key: what".
func (n Note) String() string { return n.Key + ": " + n.What }

// Report is what the loader did with a file's upstream forms. Keys lists,
// per upstream key the file sets, what this hatchery does with it; Notes
// are the lines worth an operator's attention (ignored sections, mapped,
// defaulted and unused keys, dropped placeholders), each once.
type Report struct {
	// Engine tells that the file looks like a CDS engine file: it holds a
	// section other than [hatchery.vsphere], a key only upstream has, or
	// one of upstream's placeholder entries.
	Engine bool
	Keys   []Note
	Notes  []Note
}

// Note adds a note on key (relative to KeyPrefix).
func (r *Report) Note(key, what string) {
	r.Notes = append(r.Notes, Note{Key: KeyPrefix + "." + key, What: what})
}
