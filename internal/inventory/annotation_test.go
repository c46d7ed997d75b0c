package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAnnotationModelName: a V2 VM is named by its template, a V1 VM by
// its model path.
func TestAnnotationModelName(t *testing.T) {
	assert.Equal(t, "debian12", Annotation{VMwareModelPath: "debian12", WorkerModelPath: "g/m"}.ModelName())
	assert.Equal(t, "g/m", Annotation{WorkerModelPath: "g/m"}.ModelName())
	assert.Empty(t, Annotation{}.ModelName())
}
