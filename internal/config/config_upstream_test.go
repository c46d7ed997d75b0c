package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cds-contrib/hatchery-vsphere/internal/config/upstream"
)

// upstreamFile is `engine config new hatchery:vsphere` of the peer's CDS
// commit (the file's header says how it was made).
const upstreamFile = "upstream/testdata/upstream-engine-vsphere.toml"

// filledUpstream is upstreamFile filled as an operator fills it: the
// vCenter, datacenter, datastore, network, a name, the tokens, the CDS URL
// and a region; nothing else is touched.
func filledUpstream(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(upstreamFile)
	require.NoError(t, err)
	doc := string(b)
	for _, r := range []struct{ old, new string }{
		{`endpoint = ""`, `endpoint = "vcenter.example.com"`},
		{`user = ""`, `user = "cds@vsphere.local"`},
		{"\n    password = \"\"", fmt.Sprintf("\n    password = %q", testPassword)},
		{`datacenterString = ""`, `datacenterString = "DC0"`},
		{`datastoreString = ""`, `datastoreString = "LocalDS_0"`},
		{`networkString = ""`, `networkString = "VM Network"`},
		{`name = "cds-hatchery-vsphere-generated"`, `name = "hv-upstream"`},
		{`rsaPrivateKey = ""`, fmt.Sprintf("rsaPrivateKey = %q", testRSAKey())},
		{`        token = ""`, fmt.Sprintf("        token = %q", testToken)},
		{`tokenV2 = ""`, fmt.Sprintf("tokenV2 = %q", testTokenV2)},
		{`url = "http://localhost:8081"`, `url = "https://cds.example.com"`},
		{`region = ""`, `region = "R"`},
	} {
		require.Equal(t, 1, strings.Count(doc, r.old), "%q once in %s", r.old, upstreamFile)
		doc = strings.Replace(doc, r.old, r.new, 1)
	}
	return doc
}

// writeDoc writes doc to a file of its own.
func writeDoc(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "engine.toml")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

// notesText is the report's notes, one "key: what" per line.
func notesText(r *upstream.Report) string {
	var b strings.Builder
	for _, n := range r.Notes {
		b.WriteString(n.String() + "\n")
	}
	return b.String()
}

// Upstream's own file, filled with what an operator fills, loads and
// validates: its other sections ignored and named, its placeholders
// dropped, its zeros given this hatchery's defaults.
func TestUpstreamGeneratedFileFilledValidates(t *testing.T) {
	t.Parallel()
	cfg, err := LoadAndValidate(writeDoc(t, filledUpstream(t)), noEnv())
	require.NoError(t, err)
	rep := cfg.Upstream()
	assert.True(t, rep.Engine)
	notes := notesText(rep)
	assert.Contains(t, notes, "[log], [telemetry]: ignored: sections of other CDS services")
	assert.Contains(t, notes, "hatchery.vsphere.guestCredentials[0]: ignored: upstream's placeholder entry")
	assert.Contains(t, notes, "hatchery.vsphere.workerProvisioning[0]: ignored: upstream's placeholder entry")
	for _, k := range []string{"workerRegistrationTTL", "workerProvisioningInterval", "killAwolServersInterval", "workerProvisioningPoolSize"} {
		assert.Contains(t, notes, KeyPrefix+"."+k+": 0 is upstream's \"the default\"", k)
	}
	assert.Equal(t, 1, strings.Count(notes, "[log]"), "each ignored section named once")
	assert.Empty(t, cfg.GuestCredentials)
	assert.Empty(t, cfg.WorkerProvisioning)
	def := Default()
	assert.Equal(t, def.WorkerRegistrationTTL, cfg.WorkerRegistrationTTL)
	assert.Equal(t, def.WorkerProvisioningInterval, cfg.WorkerProvisioningInterval)
	assert.Equal(t, def.KillAwolServersInterval, cfg.KillAwolServersInterval)
	assert.Equal(t, def.WorkerProvisioningPoolSize, cfg.WorkerProvisioningPoolSize)
	assert.Equal(t, 360, cfg.SlowStartThreshold, "thresholdWarning")
	assert.Equal(t, "R", cfg.CommonConfiguration.Provision.Region)
	assert.NotContains(t, notes, testPassword)
	assert.NotContains(t, notes, testToken)
}

// fieldAt walks v by key path (toml names, else json names; "x[]" is the
// first element of x).
func fieldAt(v reflect.Value, path string) (reflect.Value, bool) {
	for _, seg := range strings.Split(path, ".") {
		name, elem := strings.CutSuffix(seg, "[]")
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		found := false
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() && strings.EqualFold(keyName(f), name) {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
		if elem {
			if v.Len() == 0 {
				return reflect.Value{}, false
			}
			v = v.Index(0)
		}
	}
	return v, true
}

// typeAt is the type of the key at path under t (as fieldAt walks).
func typeAt(t reflect.Type, path string) (reflect.Type, bool) {
	for _, seg := range strings.Split(path, ".") {
		name, elem := strings.CutSuffix(seg, "[]")
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		found := false
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && strings.EqualFold(keyName(f), name) {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return nil, false
		}
		if elem {
			t = t.Elem()
		}
	}
	return t, true
}

// sampleFor is a TOML literal of kind k and the Go value it decodes to.
func sampleFor(k reflect.Kind, leaf string) (string, any) {
	switch k {
	case reflect.String:
		s := "s-" + strings.ToLower(leaf)
		return fmt.Sprintf("%q", s), s
	case reflect.Bool:
		return "true", true
	case reflect.Slice:
		return `["A=b"]`, []string{"A=b"}
	default:
		return "7", 7
	}
}

// docFor is a document setting rel (relative to KeyPrefix) to lit, with
// extra lines in the same table.
func docFor(rel, lit string, extra ...string) string {
	parts := strings.Split(rel, ".")
	table, leaf := parts[:len(parts)-1], parts[len(parts)-1]
	header := "[" + KeyPrefix + "]"
	if len(table) > 0 {
		t := KeyPrefix + "." + strings.ReplaceAll(strings.Join(table, "."), "[]", "")
		header = "[" + t + "]"
		if strings.HasSuffix(table[len(table)-1], "[]") {
			header = "[" + header + "]"
		}
	}
	if len(table) == 0 {
		return header + "\n" + leaf + " = " + lit + "\n" + strings.Join(extra, "\n") + "\n"
	}
	return "[" + KeyPrefix + "]\n" + header + "\n" + leaf + " = " + lit + "\n" + strings.Join(extra, "\n") + "\n"
}

// TestUpstreamKeyTable: per upstream key, what it does here. Kept: the
// value lands in the key of the same name; 0 where upstream means the
// default: this hatchery's default; mapped: the value lands in the target
// key; passed to the workers: it is in the workers' log configuration;
// unused: accepted and named with why. Every key is listed in the report.
func TestUpstreamKeyTable(t *testing.T) {
	t.Parallel()
	for _, u := range upstream.Keys() {
		t.Run(u.Path, func(t *testing.T) {
			t.Parallel()
			leaf := u.Path[strings.LastIndexByte(u.Path, '.')+1:]
			typ, ok := typeAt(reflect.TypeFor[Config](), u.Path)
			if !ok {
				typ, ok = typeAt(reflect.TypeFor[upstream.VSphere](), u.Path)
			}
			require.True(t, ok, "%s is decoded by the native or the upstream pass", u.Path)
			kind := typ.Kind()
			switch kind {
			case reflect.Int32, reflect.Int64:
				kind = reflect.Int
			}
			lit, want := sampleFor(kind, leaf)
			var extra []string
			switch {
			case strings.Contains(u.Path, ".graylog.") && leaf != "host", strings.Contains(u.Path, ".syslog.") && leaf != "host":
				extra = append(extra, `host = "loghost"`)
			case u.Path == "commonConfiguration.provision.workerCdn.tcp.enableTLS":
				extra = append(extra, `url = "cdn-tcp:8090"`)
			case strings.HasPrefix(u.Path, "flavors[]") && leaf != "name":
				extra = append(extra, `name = "small"`)
			}
			// In an engine file: another service's section beside.
			cfg, err := loadString(t, docFor(u.Path, lit, extra...)+"[log]\nlevel = \"info\"\n", noEnv())
			require.NoError(t, err)
			got := func(path string) any {
				v, ok := fieldAt(reflect.ValueOf(*cfg), path)
				require.True(t, ok, "%s in the loaded configuration", path)
				if v.Kind() == reflect.Int32 || v.Kind() == reflect.Int64 {
					return int(v.Int())
				}
				return v.Interface()
			}
			switch u.Action {
			case upstream.Kept:
				assert.Equal(t, want, got(u.Path))
			case upstream.ZeroDefault:
				assert.Equal(t, want, got(u.Path), "a value is kept")
				zero, err := loadString(t, docFor(u.Path, "0"), noEnv())
				require.NoError(t, err)
				v, _ := fieldAt(reflect.ValueOf(*zero), u.Path)
				d, _ := fieldAt(reflect.ValueOf(Default()), u.Path)
				assert.Equal(t, d.Interface(), v.Interface(), "0 is this hatchery's default")
			case upstream.Mapped:
				assert.Equal(t, want, got(u.Target), "mapped to %s", u.Target)
			case upstream.WorkerLog:
				b, err := json.Marshal(cfg.WorkerLog())
				require.NoError(t, err)
				assert.Contains(t, string(b), strings.Trim(fmt.Sprint(want), "\""), "in the workers' log configuration")
			case upstream.Honoured:
				require.Equal(t, "commonConfiguration.osArch", u.Path, "the one honoured key")
				assert.Equal(t, want, cfg.OSArch(), "the V2 queue's os/arch")
			case upstream.Unused:
				assert.Contains(t, notesText(cfg.Upstream()), KeyPrefix+"."+u.Path+": accepted, unused: ", "named with why")
			default:
				t.Fatalf("action %q", u.Action)
			}
			var listed string
			for _, k := range cfg.Upstream().Keys {
				if k.Key == KeyPrefix+"."+u.Path {
					listed = k.What
				}
			}
			wantWhat := strings.Split(string(u.Action), ",")[0]
			if u.Action == upstream.ZeroDefault {
				wantWhat = string(upstream.Kept) // a value other than 0
			}
			assert.True(t, strings.HasPrefix(listed, wantWhat), "the report says what is done with the key: %q", listed)
		})
	}
}

// A mistake in an engine file is still refused, naming the key as
// written: a typo (of a key of this hatchery or of one only upstream
// has), a wrong type, an out-of-range value that is not upstream's 0.
func TestUpstreamFileMistakesRefused(t *testing.T) {
	t.Parallel()
	base := filledUpstream(t)
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"typo", "workerTTL = 120", "workerTTL = 120\n    workerRegistationTTL = 5",
			"hatchery.vsphere.workerRegistationTTL: unknown key (did you mean workerRegistrationTTL?)"},
		{"typo of an upstream-only key", "thresholdWarning = 360", "thresholdWarnin = 360",
			"hatchery.vsphere.commonConfiguration.logOptions.spawnOptions.thresholdWarnin: unknown key (did you mean thresholdWarning?)"},
		{"wrong type", "osArch = []", `osArch = "linux/amd64"`, "hatchery.vsphere.commonConfiguration.osArch"},
		{"wrong type of a kept key", "workerTTL = 120", `workerTTL = "120"`, "hatchery.vsphere.workerTTL"},
		{"out of range", "workerTTL = 120", "workerTTL = -1", "hatchery.vsphere.workerTTL: -1 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, base, tc.old)
			_, err := LoadAndValidate(writeDoc(t, strings.Replace(base, tc.old, tc.new, 1)), noEnv())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var es Errors
			if errors.As(err, &es) {
				assert.Len(t, es, 1, "only the mistake: %v", es)
			}
			assert.NotContains(t, err.Error(), testPassword)
		})
	}
}

// A file of this hatchery's own form has no upstream report.
func TestNativeFileHasNoUpstreamReport(t *testing.T) {
	t.Parallel()
	cfg, err := loadString(t, "[hatchery.vsphere]\nworkerTTL = 30\n", noEnv())
	require.NoError(t, err)
	assert.False(t, cfg.Upstream().Engine)
	assert.Empty(t, cfg.Upstream().Notes)
}
