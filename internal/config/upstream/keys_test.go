package upstream

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstreamFile is `engine config new hatchery:vsphere` of the peer's CDS
// commit (the file's header says how it was made).
const upstreamFile = "testdata/upstream-engine-vsphere.toml"

// Every key the upstream tool writes under [hatchery.vsphere] is in the
// table of upstream keys.
func TestUpstreamKeysCoverTheGeneratedFile(t *testing.T) {
	t.Parallel()
	var v map[string]any
	md, err := toml.DecodeFile(upstreamFile, &v)
	require.NoError(t, err)
	n := 0
	for _, k := range md.Keys() {
		if len(k) < 3 || k[0] != "hatchery" || k[1] != "vsphere" {
			continue
		}
		if typ := md.Type(k...); typ == "Hash" || typ == "ArrayHash" {
			continue
		}
		_, ok := Lookup(strings.Join(k[2:], "."))
		assert.True(t, ok, "%s is in keys", k)
		n++
	}
	assert.Greater(t, n, 45, "the generated file's leaf keys")
}

// Each key is listed once; a mapped key names its target, an unused one
// says why; Lookup finds an array element's key without its marker.
func TestKeysTableIsWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, u := range Keys() {
		assert.False(t, seen[u.Path], "%s listed twice", u.Path)
		seen[u.Path] = true
		if u.Action == Mapped {
			assert.NotEmpty(t, u.Target, "%s: mapped to what", u.Path)
		}
		if u.Action == Unused {
			assert.NotEmpty(t, u.Why, "%s: unused, why", u.Path)
		}
	}
	u, ok := Lookup("networks.iprange")
	require.True(t, ok)
	assert.Equal(t, "networks[].iprange", u.Path)
	_, ok = Lookup("networks[].iprange")
	assert.False(t, ok, "Lookup takes the metadata's form")
}

// FilterUnknown keeps the keys neither decoding read, names each other
// service's section once in the report, and passes over the keys only
// upstream has; ReportKeys lists a mapped key left empty as such.
func TestFilterUnknownAndReportKeys(t *testing.T) {
	t.Parallel()
	doc := `[api]
url = "x"
[api.http]
port = 1
[hatchery.swarm]
name = "s"
[hatchery.vsphere]
user = "u"
typo = 1
[hatchery.vsphere.commonConfiguration]
osArch = ["linux/arm64"]
[hatchery.vsphere.commonConfiguration.provision.workerCdn]
url = ""
`
	var native struct {
		Hatchery struct {
			VSphere struct {
				User string `toml:"user"`
			} `toml:"vsphere"`
		} `toml:"hatchery"`
	}
	md, err := toml.Decode(doc, &native)
	require.NoError(t, err)
	p, err := Decode([]byte(doc))
	require.NoError(t, err)
	assert.Equal(t, []string{"linux/arm64"}, p.Common().OSArch)

	unknown := p.FilterUnknown(md)
	require.Len(t, unknown, 1)
	assert.Equal(t, "hatchery.vsphere.typo", unknown[0].String())
	rep := p.Report()
	assert.True(t, rep.Engine)
	require.Len(t, rep.Notes, 1)
	assert.Equal(t, "[api], [hatchery.swarm]: ignored: sections of other CDS services (this hatchery reads only [hatchery.vsphere])", rep.Notes[0].String())

	p.ReportKeys(md, nil)
	keys := map[string]string{}
	for _, k := range rep.Keys {
		keys[k.Key] = k.What
	}
	assert.Equal(t, "kept", keys["hatchery.vsphere.user"])
	assert.True(t, strings.HasPrefix(keys["hatchery.vsphere.commonConfiguration.osArch"], "honoured: "), keys["hatchery.vsphere.commonConfiguration.osArch"])
	assert.Equal(t, "mapped to hatchery.vsphere.commonConfiguration.cdn.url: set, it is the workers' CDN, as upstream gives it to its workers before commonConfiguration.cdn.url (not set: nothing to map)",
		keys["hatchery.vsphere.commonConfiguration.provision.workerCdn.url"])
	_, listed := keys["hatchery.vsphere.typo"]
	assert.False(t, listed, "only upstream's keys are reported")
}
