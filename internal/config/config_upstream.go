package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Drop-in for the upstream CDS vSphere hatchery (docs/coexistence.md): a
// CDS engine configuration file, as `engine config new hatchery:vsphere`
// writes it and operators fill it, is read as it is. Its other sections
// ([api], [cdn], [log], other hatcheries…) are ignored and named; every key
// of upstream's [hatchery.vsphere] is accepted with upstream's meaning:
// kept, mapped onto this hatchery's key, 0 as "the default", or accepted
// unused with the reason; upstream's placeholder array entries are
// dropped. What was done is the file's UpstreamReport (Config.Upstream),
// printed by `config check` and logged at start.

// UpstreamAction is what this hatchery does with one upstream key.
type UpstreamAction string

// The actions.
const (
	// UpstreamKept: the same key with the same meaning.
	UpstreamKept UpstreamAction = "kept"
	// UpstreamZeroDefault: kept; 0, upstream's "the default", gives this
	// hatchery's default.
	UpstreamZeroDefault UpstreamAction = "kept, 0 is the default"
	// UpstreamMapped: read into another key of this hatchery.
	UpstreamMapped UpstreamAction = "mapped"
	// UpstreamWorkerLog: handed to the workers in their configuration.
	UpstreamWorkerLog UpstreamAction = "passed to the workers"
	// UpstreamHonoured: no key of this hatchery, but used with upstream's
	// meaning (Config.OSArch).
	UpstreamHonoured UpstreamAction = "honoured"
	// UpstreamUnused: accepted, no effect here.
	UpstreamUnused UpstreamAction = "accepted, unused"
)

// UpstreamKey is one key of upstream's [hatchery.vsphere] at the CDS
// commit the conformance suite's peer is built from (the one named in the
// header of testdata/upstream-engine-vsphere.toml): its path relative to
// KeyPrefix (array elements "[]"), what this hatchery does with it, the
// key it maps to, and why.
type UpstreamKey struct {
	Path   string
	Action UpstreamAction
	Target string // UpstreamMapped: the key of this hatchery (relative to KeyPrefix)
	Why    string
}

// upstreamKeys lists every key of upstream's [hatchery.vsphere]; the keys
// `engine config new hatchery:vsphere` writes are checked against it
// (internal/config/testdata/upstream-engine-vsphere.toml).
var upstreamKeys = []UpstreamKey{
	{Path: "commonConfiguration.name", Action: UpstreamKept},
	{Path: "commonConfiguration.osArch", Action: UpstreamHonoured, Why: "the os/arch of the V2 jobs the queue listing asks the API for; empty asks for none, and the API lists linux/amd64 jobs"},
	{Path: "commonConfiguration.rsaPrivateKey", Action: UpstreamKept},
	{Path: "commonConfiguration.url", Action: UpstreamKept},
	{Path: "commonConfiguration.http.addr", Action: UpstreamKept},
	{Path: "commonConfiguration.http.port", Action: UpstreamKept},
	{Path: "commonConfiguration.http.headerXForwardedFor", Action: UpstreamUnused, Why: "/mon logs no client address, so there is no forwarded address to read"},
	{Path: "commonConfiguration.api.http.url", Action: UpstreamKept},
	{Path: "commonConfiguration.api.http.insecure", Action: UpstreamKept},
	{Path: "commonConfiguration.api.token", Action: UpstreamKept},
	{Path: "commonConfiguration.api.tokenV2", Action: UpstreamKept},
	{Path: "commonConfiguration.api.requestTimeout", Action: UpstreamKept},
	{Path: "commonConfiguration.api.maxHeartbeatFailures", Action: UpstreamKept},
	{Path: "commonConfiguration.cdn.url", Action: UpstreamKept, Why: "the CDN the workers reach (this hatchery sends nothing to the CDN itself)"},
	{Path: "commonConfiguration.cdn.tcp.url", Action: UpstreamKept},
	{Path: "commonConfiguration.cdn.tcp.enableTLS", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.disableV2QueuePolling", Action: UpstreamMapped, Target: "disableV2QueuePolling"},
	{Path: "commonConfiguration.provision.injectEnvVars", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.maxWorker", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.maxConcurrentProvisioning", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.maxConcurrentRegistering", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.registerFrequency", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.region", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.ignoreJobWithNoRegion", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.workerApiHttp.url", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.workerApiHttp.insecure", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.workerCdn.url", Action: UpstreamMapped, Target: "commonConfiguration.cdn.url", Why: "set, it is the workers' CDN, as upstream gives it to its workers before commonConfiguration.cdn.url"},
	{Path: "commonConfiguration.provision.workerCdn.tcp.url", Action: UpstreamMapped, Target: "commonConfiguration.cdn.tcp.url", Why: "set, it is the workers' CDN log address, before commonConfiguration.cdn.tcp.url"},
	{Path: "commonConfiguration.provision.workerCdn.tcp.enableTLS", Action: UpstreamMapped, Target: "commonConfiguration.cdn.tcp.enableTLS", Why: "with workerCdn.tcp.url only, as upstream pairs them"},
	{Path: "commonConfiguration.provision.workerBasedir", Action: UpstreamKept},
	{Path: "commonConfiguration.provision.workerLogsOptions.level", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.host", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.port", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.protocol", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.extraKey", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.graylog.extraValue", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.host", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.port", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.protocol", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.workerLogsOptions.syslog.extraTag", Action: UpstreamWorkerLog},
	{Path: "commonConfiguration.provision.maxAttemptsNumberBeforeFailure", Action: UpstreamKept},
	{Path: "commonConfiguration.logOptions.spawnOptions.thresholdWarning", Action: UpstreamMapped, Target: "slowStartThreshold", Why: "a job whose worker starts later than this after it was queued gets a spawn info saying where the time went (unless slowStartThreshold is set)"},
	{Path: "commonConfiguration.logOptions.spawnOptions.thresholdCritical", Action: UpstreamUnused, Why: "one slow-start threshold here (slowStartThreshold, which thresholdWarning sets); upstream's code at that commit reads neither"},
	{Path: "user", Action: UpstreamKept},
	{Path: "endpoint", Action: UpstreamKept},
	{Path: "password", Action: UpstreamKept},
	{Path: "datacenterString", Action: UpstreamKept},
	{Path: "datastoreString", Action: UpstreamKept},
	{Path: "networkString", Action: UpstreamKept},
	{Path: "cardName", Action: UpstreamKept},
	{Path: "iprange", Action: UpstreamKept},
	{Path: "gateway", Action: UpstreamKept},
	{Path: "dns", Action: UpstreamKept},
	{Path: "subnetMask", Action: UpstreamKept},
	{Path: "networks[].iprange", Action: UpstreamKept},
	{Path: "networks[].gateway", Action: UpstreamKept},
	{Path: "networks[].subnetMask", Action: UpstreamKept},
	{Path: "workerTTL", Action: UpstreamZeroDefault},
	{Path: "workerRegistrationTTL", Action: UpstreamZeroDefault},
	{Path: "workerProvisioningInterval", Action: UpstreamZeroDefault},
	{Path: "killAwolServersInterval", Action: UpstreamZeroDefault, Why: "upstream's default is 60 s"},
	{Path: "finishedWorkerGracePeriod", Action: UpstreamZeroDefault, Why: "upstream's default is 180 s; here the default, 0, destroys a finished worker's VM at the next cleanup pass"},
	{Path: "workerProvisioningPoolSize", Action: UpstreamZeroDefault, Why: "upstream's 0 clones without a bound; here pool clones are bounded by this and by maxConcurrentTasks"},
	{Path: "workerProvisioning[].modelVMWare", Action: UpstreamKept},
	{Path: "workerProvisioning[].number", Action: UpstreamKept},
	{Path: "guestCredentials[].modelVMWare", Action: UpstreamKept},
	{Path: "guestCredentials[].username", Action: UpstreamKept},
	{Path: "guestCredentials[].password", Action: UpstreamKept},
	{Path: "models[].modelVMWare", Action: UpstreamKept},
	{Path: "models[].username", Action: UpstreamKept},
	{Path: "models[].password", Action: UpstreamKept},
	{Path: "models[].preStartScript", Action: UpstreamKept},
	{Path: "defaultWorkerModelsV2[].workerModelV2", Action: UpstreamKept},
	{Path: "defaultWorkerModelsV2[].binaries", Action: UpstreamKept},
	{Path: "maxCpus", Action: UpstreamKept},
	{Path: "maxMemoryMB", Action: UpstreamKept},
	{Path: "flavors[].name", Action: UpstreamKept},
	{Path: "flavors[].cpus", Action: UpstreamKept},
	{Path: "flavors[].memoryMB", Action: UpstreamKept},
	{Path: "flavors[].diskSizeGB", Action: UpstreamKept},
	{Path: "defaultFlavor", Action: UpstreamKept},
	{Path: "countSmallerFlavorToKeep", Action: UpstreamKept},
}

// UpstreamKeys returns upstream's [hatchery.vsphere] keys and what this
// hatchery does with each.
func UpstreamKeys() []UpstreamKey { return slices.Clone(upstreamKeys) }

// UpstreamNote is one line of an UpstreamReport: a key (with KeyPrefix, or
// a section name) and what this hatchery does with it.
type UpstreamNote struct {
	Key  string
	What string
}

// String is "key: what".
func (n UpstreamNote) String() string { return n.Key + ": " + n.What }

// UpstreamReport is what the loader did with a file's upstream forms.
// Keys lists, per upstream key the file sets, what this hatchery does
// with it; Notes are the lines worth an operator's attention (ignored
// sections, mapped, defaulted and unused keys, dropped placeholders), each
// once.
type UpstreamReport struct {
	// Engine tells that the file looks like a CDS engine file: it holds a
	// section other than [hatchery.vsphere], a key only upstream has, or
	// one of upstream's placeholder entries.
	Engine bool
	Keys   []UpstreamNote
	Notes  []UpstreamNote
}

// Upstream returns what the loader did with the file's upstream forms
// (never nil for a loaded configuration).
func (c *Config) Upstream() *UpstreamReport {
	if c.upstream == nil {
		return &UpstreamReport{}
	}
	return c.upstream
}

// WorkerLog is the log configuration handed to every worker
// (upstream's commonConfiguration.provision.workerLogsOptions). It holds
// graylog's extraValue, which may be a token: never log it.
func (c *Config) WorkerLog() spawn.WorkerLogConfig { return c.workerLog }

// OSArch are the os/arch of the V2 jobs the queue listing asks for
// (upstream's commonConfiguration.osArch); empty: the API's default,
// linux/amd64.
func (c *Config) OSArch() []string { return slices.Clone(c.osArch) }

// upstreamRoot is the second decoding of the document: the keys only
// upstream has.
type upstreamRoot struct {
	Hatchery struct {
		VSphere struct {
			CommonConfiguration struct {
				OSArch []string `toml:"osArch"`
				HTTP   struct {
					HeaderXForwardedFor string `toml:"headerXForwardedFor"`
				} `toml:"http"`
				LogOptions struct {
					SpawnOptions struct {
						ThresholdCritical int `toml:"thresholdCritical"`
						ThresholdWarning  int `toml:"thresholdWarning"`
					} `toml:"spawnOptions"`
				} `toml:"logOptions"`
				Provision struct {
					DisableV2QueuePolling bool `toml:"disableV2QueuePolling"`
					WorkerCDN             struct {
						URL string `toml:"url"`
						TCP struct {
							EnableTLS bool   `toml:"enableTLS"`
							URL       string `toml:"url"`
						} `toml:"tcp"`
					} `toml:"workerCdn"`
					WorkerLogsOptions struct {
						Level   string `toml:"level"`
						Graylog struct {
							Host       string `toml:"host"`
							Port       int    `toml:"port"`
							Protocol   string `toml:"protocol"`
							ExtraKey   string `toml:"extraKey"`
							ExtraValue string `toml:"extraValue"`
						} `toml:"graylog"`
						Syslog struct {
							Host     string `toml:"host"`
							Port     int    `toml:"port"`
							Protocol string `toml:"protocol"`
							ExtraTag string `toml:"extraTag"`
						} `toml:"syslog"`
					} `toml:"workerLogsOptions"`
				} `toml:"provision"`
			} `toml:"commonConfiguration"`
		} `toml:"vsphere"`
	} `toml:"hatchery"`
}

// upstreamPass is the state of the upstream reading of one document.
type upstreamPass struct {
	md  toml.MetaData // the second decoding's
	up  upstreamRoot
	rep *UpstreamReport
}

// decodeUpstream decodes the keys only upstream has; an error is a wrong
// type, named as decodeError names it.
func decodeUpstream(data []byte, secrets []string) (*upstreamPass, error) {
	p := &upstreamPass{rep: &UpstreamReport{}}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&p.up)
	if err != nil {
		return nil, decodeError(err, secrets)
	}
	p.md = md
	return p, nil
}

// decodedHere tells whether the upstream pass decoded key.
func (p *upstreamPass) decodedHere(key toml.Key) bool {
	if !p.md.IsDefined(key...) {
		return false
	}
	for _, k := range p.md.Undecoded() {
		if k.String() == key.String() {
			return false
		}
	}
	return true
}

// otherSection returns the section an undecoded key belongs to when it is
// a table of another CDS service ([api], [hatchery.swarm]…), "" otherwise.
func otherSection(md toml.MetaData, k toml.Key) string {
	var sec toml.Key
	switch {
	case k[0] != "hatchery":
		sec = k[:1]
	case len(k) > 1 && k[1] != "vsphere":
		sec = k[:2]
	default:
		return ""
	}
	if t := md.Type(sec...); t != "Hash" && t != "ArrayHash" {
		return ""
	}
	return sec.String()
}

// filterUnknown splits the keys the native decoding left undecoded into
// those the upstream pass decoded, the sections of other services (named
// once each in the report) and the rest, returned: the unknown keys.
func (p *upstreamPass) filterUnknown(md toml.MetaData) []toml.Key {
	var out []toml.Key
	var sections []string
	undecodedHere := map[string]bool{}
	for _, k := range p.md.Undecoded() {
		undecodedHere[k.String()] = true
	}
	for _, k := range md.Undecoded() {
		if !undecodedHere[k.String()] {
			continue // an upstream key
		}
		if s := otherSection(md, k); s != "" {
			if !slices.Contains(sections, s) {
				sections = append(sections, s)
			}
			continue
		}
		out = append(out, k)
	}
	if len(sections) > 0 {
		p.rep.Engine = true
		names := make([]string, len(sections))
		for i, s := range sections {
			names[i] = "[" + s + "]"
		}
		p.rep.Notes = append(p.rep.Notes, UpstreamNote{Key: strings.Join(names, ", "),
			What: "ignored: sections of other CDS services (this hatchery reads only [" + KeyPrefix + "])"})
	}
	return out
}

// apply (after filterUnknown) maps the upstream keys onto cfg, gives 0 its default meaning,
// drops the placeholder entries and writes the per-key report. mdNative is
// the native decoding's metadata.
func (p *upstreamPass) apply(mdNative toml.MetaData, cfg *Config) {
	up := p.up.Hatchery.VSphere.CommonConfiguration
	def := Default()
	vs := []string{"hatchery", "vsphere"}
	defined := func(path string) bool {
		return mdNative.IsDefined(append(slices.Clone(vs), strings.Split(path, ".")...)...)
	}
	note := func(key, format string, args ...any) {
		p.rep.Notes = append(p.rep.Notes, UpstreamNote{Key: KeyPrefix + "." + key, What: fmt.Sprintf(format, args...)})
	}
	placeholder := func(key, why string) {
		p.rep.Engine = true
		note(key, "ignored: upstream's placeholder entry (%s)", why)
	}

	// Keys only upstream has.
	if defined("commonConfiguration.provision.disableV2QueuePolling") {
		p.rep.Engine = true
		if !defined("disableV2QueuePolling") {
			cfg.DisableV2QueuePolling = up.Provision.DisableV2QueuePolling
		}
	}
	if defined("commonConfiguration.provision.workerCdn") {
		p.rep.Engine = true
		w := up.Provision.WorkerCDN
		if w.URL != "" {
			cfg.CommonConfiguration.CDN.URL = w.URL
		}
		if w.TCP.URL != "" {
			cfg.CommonConfiguration.CDN.TCP.URL = w.TCP.URL
			cfg.CommonConfiguration.CDN.TCP.EnableTLS = w.TCP.EnableTLS
		}
	}
	if defined("commonConfiguration.logOptions") {
		p.rep.Engine = true
		if w := up.LogOptions.SpawnOptions.ThresholdWarning; w > 0 && !defined("slowStartThreshold") {
			cfg.SlowStartThreshold = w
		}
	}
	if defined("commonConfiguration.provision.workerLogsOptions") {
		p.rep.Engine = true
		l := up.Provision.WorkerLogsOptions
		cfg.workerLog = spawn.WorkerLogConfig{Level: l.Level}
		if l.Graylog.Host != "" {
			cfg.workerLog.GraylogHost, cfg.workerLog.GraylogPort = l.Graylog.Host, portString(l.Graylog.Port)
			cfg.workerLog.GraylogProtocol, cfg.workerLog.GraylogExtraKey, cfg.workerLog.GraylogExtraValue = l.Graylog.Protocol, l.Graylog.ExtraKey, l.Graylog.ExtraValue
		}
		if l.Syslog.Host != "" {
			cfg.workerLog.SyslogHost, cfg.workerLog.SyslogPort = l.Syslog.Host, portString(l.Syslog.Port)
			cfg.workerLog.SyslogProtocol, cfg.workerLog.SyslogExtraTag = l.Syslog.Protocol, l.Syslog.ExtraTag
		}
	}
	if defined("commonConfiguration.osArch") || defined("commonConfiguration.http.headerXForwardedFor") {
		p.rep.Engine = true
	}
	cfg.osArch = slices.Clone(up.OSArch)

	// 0, upstream's "the default".
	zeros := []struct {
		key string
		v   *int
		def int
	}{
		{"workerTTL", &cfg.WorkerTTL, def.WorkerTTL},
		{"workerRegistrationTTL", &cfg.WorkerRegistrationTTL, def.WorkerRegistrationTTL},
		{"workerProvisioningInterval", &cfg.WorkerProvisioningInterval, def.WorkerProvisioningInterval},
		{"killAwolServersInterval", &cfg.KillAwolServersInterval, def.KillAwolServersInterval},
		{"finishedWorkerGracePeriod", &cfg.FinishedWorkerGracePeriod, def.FinishedWorkerGracePeriod},
		{"workerProvisioningPoolSize", &cfg.WorkerProvisioningPoolSize, def.WorkerProvisioningPoolSize},
	}
	defaulted := map[string]string{}
	for _, z := range zeros {
		if defined(z.key) && *z.v == 0 {
			*z.v = z.def
			defaulted[z.key] = fmt.Sprintf("0 is upstream's \"the default\": this hatchery's default, %d%s", z.def, zeroWhy(z.key))
			if z.def != 0 {
				note(z.key, "%s", defaulted[z.key])
			}
		}
	}

	// Placeholders: [[guestCredentials]] / [[models]] entries without a
	// key, [[workerProvisioning]] entries without a model and number 0.
	cfg.GuestCredentials = dropPlaceholders(cfg.GuestCredentials, func(g GuestCredential) bool { return reflect.ValueOf(g).IsZero() },
		func(i int) { placeholder(fmt.Sprintf("guestCredentials[%d]", i), "every key commented out") })
	cfg.Models = dropPlaceholders(cfg.Models, func(g GuestCredential) bool { return reflect.ValueOf(g).IsZero() },
		func(i int) { placeholder(fmt.Sprintf("models[%d]", i), "every key commented out") })
	cfg.WorkerProvisioning = dropPlaceholders(cfg.WorkerProvisioning, func(w WorkerProvisioning) bool {
		return w.ModelPath == "" && w.ModelVMWare == "" && w.Number == 0 && !w.Scales()
	}, func(i int) {
		placeholder(fmt.Sprintf("workerProvisioning[%d]", i), "no model, number 0: provisions nothing")
	})

	// Per key, what is done with it.
	p.reportKeys(mdNative, defaulted)
	if cfg.workerLog != (spawn.WorkerLogConfig{}) {
		note("commonConfiguration.provision.workerLogsOptions", "passed to the workers in their configuration (log level, graylog, syslog)")
	}
	if p.rep.Engine || len(p.rep.Notes) > 0 {
		cfg.upstream = p.rep
	}
}

// reportKeys writes, for each upstream key the native decoding saw
// (mdNative), what is done with it in the report (its Keys, and its Notes
// for the keys an operator should read about); defaulted holds the notes
// of the keys whose 0 took this hatchery's default.
func (p *upstreamPass) reportKeys(mdNative toml.MetaData, defaulted map[string]string) {
	seen := map[string]bool{}
	for _, k := range mdNative.Keys() {
		if len(k) < 3 || k[0] != "hatchery" || k[1] != "vsphere" {
			continue
		}
		rel := strings.Join(k[2:], ".")
		u, ok := lookupUpstream(rel)
		if !ok || seen[rel] {
			continue
		}
		seen[rel] = true
		what := string(u.Action)
		v := p.valueAt(u.Path)
		set := !v.IsZero() && (v.Kind() != reflect.Slice || v.Len() > 0)
		switch u.Action {
		case UpstreamMapped:
			what += " to " + KeyPrefix + "." + u.Target
		case UpstreamZeroDefault:
			what = string(UpstreamKept)
			if d, ok := defaulted[rel]; ok {
				what = d
			}
		}
		if u.Why != "" && u.Action != UpstreamZeroDefault {
			what += ": " + u.Why
		}
		if (u.Action == UpstreamMapped || u.Action == UpstreamWorkerLog) && !set {
			what += " (not set: nothing to map)"
		}
		p.rep.Keys = append(p.rep.Keys, UpstreamNote{Key: KeyPrefix + "." + u.Path, What: what})
		if u.Action == UpstreamUnused || ((u.Action == UpstreamMapped || u.Action == UpstreamHonoured) && set) {
			p.rep.Notes = append(p.rep.Notes, UpstreamNote{Key: KeyPrefix + "." + u.Path, What: what})
		}
	}
}

// valueAt is the value of an upstream-only key (its path relative to
// KeyPrefix) as the upstream pass decoded it; the zero Value's IsZero
// cannot be called, so a key of the native decoding gives a zero int.
func (p *upstreamPass) valueAt(path string) reflect.Value {
	v := reflect.ValueOf(p.up.Hatchery.VSphere)
	for _, seg := range strings.Split(path, ".") {
		found := false
		for i := 0; v.Kind() == reflect.Struct && i < v.NumField(); i++ {
			if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ","); n == seg {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.ValueOf(0)
		}
	}
	return v
}

// zeroWhy is the reason shown with a 0 given its default meaning.
func zeroWhy(key string) string {
	if u, ok := lookupUpstream(key); ok && u.Why != "" {
		return " (" + u.Why + ")"
	}
	return ""
}

// lookupUpstream finds an upstream key by its path as the metadata writes
// it (no array markers).
func lookupUpstream(rel string) (UpstreamKey, bool) {
	for _, u := range upstreamKeys {
		if strings.ReplaceAll(u.Path, "[]", "") == rel {
			return u, true
		}
	}
	return UpstreamKey{}, false
}

// dropPlaceholders returns list without the entries placeholder selects,
// calling dropped with the index of each as written.
func dropPlaceholders[T any](list []T, placeholder func(T) bool, dropped func(int)) []T {
	var out []T
	for i, e := range list {
		if placeholder(e) {
			dropped(i)
			continue
		}
		out = append(out, e)
	}
	return out
}

// portString is a port for the worker's log configuration: "" for 0.
func portString(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

// addUpstream adds upstream's keys to the tree, so that a typo of a key
// only upstream has gets its "did you mean".
func (tree configKeyTree) addUpstream() {
	for _, u := range upstreamKeys {
		parent := KeyPrefix
		for _, seg := range strings.Split(u.Path, ".") {
			name := strings.TrimSuffix(seg, "[]")
			if !slices.Contains(tree[parent], name) {
				tree[parent] = append(tree[parent], name)
			}
			parent += "." + seg
		}
	}
}
