package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cds-contrib/hatchery-vsphere/internal/config/upstream"
	"github.com/cds-contrib/hatchery-vsphere/sdk/spawn"
)

// Drop-in for the upstream CDS vSphere hatchery (docs/coexistence.md): a
// CDS engine configuration file, as `engine config new hatchery:vsphere`
// writes it and operators fill it, is read as it is. Its other sections
// ([api], [cdn], [log], other hatcheries…) are ignored and named; every key
// of upstream's [hatchery.vsphere] is accepted with upstream's meaning:
// kept, mapped onto this hatchery's key, 0 as "the default", or accepted
// unused with the reason; upstream's placeholder array entries are
// dropped. What was done is the file's upstream.Report (Config.Upstream),
// printed by `config check` and logged at start. The table of upstream's
// keys, the decoding of the keys only upstream has and the report are
// internal/config/upstream's; what they become in a Config is here.

// Upstream returns what the loader did with the file's upstream forms
// (never nil for a loaded configuration).
func (c *Config) Upstream() *upstream.Report {
	if c.upstream == nil {
		return &upstream.Report{}
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

// decodeUpstream decodes the keys only upstream has; an error is a wrong
// type, named as decodeError names it.
func decodeUpstream(data []byte, secrets []string) (*upstream.Pass, error) {
	p, err := upstream.Decode(data)
	if err != nil {
		return nil, decodeError(err, secrets)
	}
	return p, nil
}

// applyUpstream (after the pass's FilterUnknown) maps the upstream keys
// the pass p decoded onto cfg, gives 0 its default meaning, drops the
// placeholder entries and writes the per-key report. mdNative is the
// native decoding's metadata.
func applyUpstream(p *upstream.Pass, mdNative toml.MetaData, cfg *Config) {
	up := p.Common()
	rep := p.Report()
	def := Default()
	vs := []string{"hatchery", "vsphere"}
	defined := func(path string) bool {
		return mdNative.IsDefined(append(slices.Clone(vs), strings.Split(path, ".")...)...)
	}
	note := func(key, format string, args ...any) {
		rep.Note(key, fmt.Sprintf(format, args...))
	}
	placeholder := func(key, why string) {
		rep.Engine = true
		note(key, "ignored: upstream's placeholder entry (%s)", why)
	}

	// Keys only upstream has.
	if defined("commonConfiguration.provision.disableV2QueuePolling") {
		rep.Engine = true
		if !defined("disableV2QueuePolling") {
			cfg.DisableV2QueuePolling = up.Provision.DisableV2QueuePolling
		}
	}
	if defined("commonConfiguration.provision.workerCdn") {
		rep.Engine = true
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
		rep.Engine = true
		if w := up.LogOptions.SpawnOptions.ThresholdWarning; w > 0 && !defined("slowStartThreshold") {
			cfg.SlowStartThreshold = w
		}
	}
	if defined("commonConfiguration.provision.workerLogsOptions") {
		rep.Engine = true
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
		rep.Engine = true
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
	p.ReportKeys(mdNative, defaulted)
	if cfg.workerLog != (spawn.WorkerLogConfig{}) {
		note("commonConfiguration.provision.workerLogsOptions", "passed to the workers in their configuration (log level, graylog, syslog)")
	}
	if rep.Engine || len(rep.Notes) > 0 {
		cfg.upstream = rep
	}
}

// zeroWhy is the reason shown with a 0 given its default meaning.
func zeroWhy(key string) string {
	if u, ok := upstream.Lookup(key); ok && u.Why != "" {
		return " (" + u.Why + ")"
	}
	return ""
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
	for _, u := range upstream.Keys() {
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
