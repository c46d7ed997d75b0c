package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadReportsEveryWrongType: a file with several wrong-typed values
// reports each, with its key path and line, in file order (the decoder
// stopped at the first: one problem was reported); a duration key given
// as "2h" is told its unit.
func TestLoadReportsEveryWrongType(t *testing.T) {
	t.Parallel()
	doc := `[hatchery.vsphere]
workerTTL = "2h"
maxCpus = "12"
datacenterString = "DC0"

[hatchery.vsphere.commonConfiguration.http]
port = "x"
`
	_, err := loadString(t, doc, noEnv())
	require.Error(t, err)
	var es Errors
	require.True(t, errors.As(err, &es), "%T: %v", err, err)
	require.Len(t, es, 3, "%q", err.Error())
	assert.Equal(t, "hatchery.vsphere.workerTTL", es[0].Key)
	assert.Equal(t, "line 2: incompatible types: TOML value has type string; destination has type integer; want a number of minutes, e.g. 120", es[0].Problem)
	assert.Equal(t, "hatchery.vsphere.maxCpus", es[1].Key)
	assert.Contains(t, es[1].Problem, "line 3: incompatible types")
	assert.NotContains(t, es[1].Problem, "want a number of", "not a duration key")
	assert.Equal(t, "hatchery.vsphere.commonConfiguration.http.port", es[2].Key)
	assert.Contains(t, es[2].Problem, "line 7: ")
}

// TestWrongTypeOfASecretKeyHidesIt: the secret keys' messages stay hidden
// when several wrong types are listed.
func TestWrongTypeOfASecretKeyHidesIt(t *testing.T) {
	t.Parallel()
	doc := "[hatchery.vsphere]\nmaxCpus = \"12\"\npassword = 12345678901\n"
	_, err := loadString(t, doc, noEnv())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hatchery.vsphere.maxCpus: line 2: incompatible types")
	assert.Contains(t, err.Error(), "hatchery.vsphere.password: line 3: invalid value (not shown")
	assert.NotContains(t, err.Error(), "12345678901")
}

// TestBlankLineKeepsLineNumbers: blanking a line keeps every other line at
// its number.
func TestBlankLineKeepsLineNumbers(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "a\n\nc\n", string(blankLine([]byte("a\nb\nc\n"), 2)))
	assert.Equal(t, "a\n", string(blankLine([]byte("a\nb"), 2)))
	assert.Equal(t, "a\n", string(blankLine([]byte("a\n"), 5)))
}

// TestSyntaxErrorIsNotATypeError: a syntax error, whose text reads like a
// type error's, is reported as before ("line N: key: problem"), alone.
func TestSyntaxErrorIsNotATypeError(t *testing.T) {
	t.Parallel()
	_, err := loadString(t, "[Unit]\nDescription = not toml\n", noEnv())
	require.Error(t, err)
	var es Errors
	assert.False(t, errors.As(err, &es), "%v", err)
	assert.Contains(t, err.Error(), "line 2: Unit.Description: expected value")
}
