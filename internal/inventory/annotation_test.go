package inventory

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnnotationModelName: a V2 VM is named by its template, a V1 VM by
// its model path.
func TestAnnotationModelName(t *testing.T) {
	assert.Equal(t, "debian12", Annotation{VMwareModelPath: "debian12", WorkerModelPath: "g/m"}.ModelName())
	assert.Equal(t, "g/m", Annotation{WorkerModelPath: "g/m"}.ModelName())
	assert.Empty(t, Annotation{}.ModelName())
}

// The pool flag is written as warm_pool, never under the key
// provisioning (in any letter case: Go's decoder, upstream's too, matches
// keys without regard to case), which the upstream CDS vSphere hatchery
// claims VMs by (docs/coexistence.md); records of earlier versions, with
// provisioning, still read as pool VMs. Fails if the tag goes back to
// provisioning, or if the legacy key is no longer read.
func TestAnnotationPoolFlagKey(t *testing.T) {
	t.Parallel()
	for _, flag := range []bool{true, false} {
		s := Annotation{HatcheryName: "ours", Provisioning: flag, VMwareModelPath: "debian12"}.Marshal()
		var keys map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(s), &keys))
		for k := range keys {
			assert.NotEqual(t, "provisioning", strings.ToLower(k), s)
		}
		assert.Contains(t, s, fmt.Sprintf(`"warm_pool":%t`, flag))
		a, err := ParseAnnotation(s)
		require.NoError(t, err)
		assert.Equal(t, flag, a.Provisioning)
	}
	for notes, want := range map[string]bool{
		`{"hatchery_name":"ours","provisioning":true}`:                   true,
		`{"hatchery_name":"ours","Provisioning":true}`:                   true,
		`{"hatchery_name":"ours","provisioning":false}`:                  false,
		`{"hatchery_name":"ours","warm_pool":true,"provisioning":false}`: true,
		`{"hatchery_name":"ours"}`:                                       false,
	} {
		a, err := ParseAnnotation(notes)
		require.NoError(t, err, notes)
		assert.Equal(t, want, a.Provisioning, notes)
	}
}
