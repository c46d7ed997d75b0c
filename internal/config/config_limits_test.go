package config

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nestDoc writes `a = ` followed by depth opening brackets, a value and the
// closing ones.
func nestDoc(open, close string, depth int) string {
	return "[hatchery.vsphere]\na = " + strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth) + "\n"
}

// TestLoadRefusesHostileShapes: deep nesting once overflowed the parser's
// stack (arrays) or grew without bound (inline tables); a flood of keys
// made the key checks quadratic. Each is refused before parsing, naming the
// line.
func TestLoadRefusesHostileShapes(t *testing.T) {
	t.Parallel()
	var many strings.Builder
	many.WriteString("[hatchery.vsphere]\n")
	for i := 0; many.Len() < 200<<10; i++ {
		fmt.Fprintf(&many, "k%d = {a={a={a={a=1}}}}\n", i)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"deep arrays", nestDoc("[", "]", 200000), "nested more than 16 deep"},
		{"deep inline tables", nestDoc("{a=", "}", 100000), "nested more than 16 deep"},
		{"just too deep", nestDoc("[", "]", maxConfigNesting+1), "line 2: arrays or inline tables nested more than 16 deep"},
		{"too many items", many.String(), "more than 10000 keys"},
		{"too large", "[hatchery.vsphere]\n#" + strings.Repeat("x", maxConfigBytes) + "\n", "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadString(t, tc.doc, secretEnv())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestCheckShapeSkipsStringsAndComments: brackets inside strings and
// comments do not count, so a real file with such text still loads.
func TestCheckShapeSkipsStringsAndComments(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[{", 40)
	doc := "# " + deep + "\n" +
		"[hatchery.vsphere]\n" +
		"user = \"" + deep + "\\\"" + deep + "\" # " + deep + "\n" +
		"folderString = '" + deep + "'\n" +
		"networkString = \"\"\"\n" + deep + "\n\\\"\\\"\\\" ]]]] \"\"\"\n" +
		"datastoreString = '''\n" + deep + "\n'''\n" +
		"[hatchery.vsphere.commonConfiguration.provision]\n" +
		"injectEnvVars = [\"A=" + deep + "\", 'B=[[[[']\n"
	require.NoError(t, checkShape([]byte(doc), maxConfigNesting, maxConfigItems))
	cfg, err := loadString(t, doc, secretEnv())
	require.NoError(t, err)
	assert.Equal(t, deep+"\""+deep, cfg.User)
	assert.Equal(t, deep, cfg.FolderString)
	assert.Equal(t, deep+"\n\"\"\" ]]]] ", cfg.NetworkString)
	assert.Equal(t, "A="+deep, cfg.CommonConfiguration.Provision.InjectEnvVars[0])

	require.NoError(t, checkShape([]byte(nestDoc("[", "]", maxConfigNesting-1)), maxConfigNesting, maxConfigItems))
}

// TestLoadRefusesKeysInTwoCases: the decoder matches keys regardless of
// case, so `maxCpus` and `MaxCpus` in one table silently kept the last one.
func TestLoadRefusesKeysInTwoCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, key string }{
		{"top level", "[hatchery.vsphere]\nmaxCpus = 8\nMaxCpus = 64\n", "hatchery.vsphere.MaxCpus"},
		{"nested table", "[hatchery.vsphere.commonConfiguration.api]\nrequestTimeout = 5\nREQUESTTIMEOUT = 50\n", "hatchery.vsphere.commonConfiguration.api.REQUESTTIMEOUT"},
		{"one array element", "[hatchery.vsphere]\n[[hatchery.vsphere.networks]]\niprange = \"10.0.0.1/24\"\nIPRange = \"10.0.1.1/24\"\n", "hatchery.vsphere.networks.IPRange"},
		{"two spellings of a table", "[hatchery.vsphere]\nmaxCpus = 8\n[hatchery.VSphere]\nmaxCPUs = 9\n", "hatchery.VSphere.maxCPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadString(t, tc.doc, secretEnv())
			var es Errors
			require.True(t, errors.As(err, &es), "%v", err)
			found := false
			for _, e := range es {
				found = found || (e.Key == tc.key && strings.Contains(e.Problem, "another letter case"))
			}
			assert.True(t, found, "%v", err)
		})
	}
	// The same key in two elements of an array of tables is no duplicate.
	_, err := loadString(t, "[hatchery.vsphere]\n[[hatchery.vsphere.networks]]\niprange = \"10.0.0.1/24\"\n[[hatchery.vsphere.networks]]\niprange = \"10.0.1.1/24\"\n", secretEnv())
	require.NoError(t, err)
}

// TestValidateBoundsStaticRanges: thousands of large ranges stop being
// expanded once they pass the per-hatchery bound.
func TestValidateBoundsStaticRanges(t *testing.T) {
	t.Parallel()
	c := validConfig()
	for i := range 2000 {
		c.Networks = append(c.Networks, Network{IPRange: fmt.Sprintf("10.%d.%d.0/16", i/250, i%250)})
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err := c.Validate()
	runtime.ReadMemStats(&m1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hatchery.vsphere.networks: the static ranges hold more than 65536 addresses")
	assert.Less(t, m1.TotalAlloc-m0.TotalAlloc, uint64(256<<20), "validation allocated too much")
}

// loadMemory returns the bytes allocated while loading doc.
func loadMemory(doc []byte, o LoadOptions) (uint64, error) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := LoadFrom(bytes.NewReader(doc), o)
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc, err
}
