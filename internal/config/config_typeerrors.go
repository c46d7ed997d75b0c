package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// maxTypeErrors bounds the wrong-typed values one load reports: each costs
// a decode of the file, and a file with more is not a configuration of
// this hatchery.
const maxTypeErrors = 50

// typeErrorLocRE reads the line and key of a BurntSushi/toml decode
// (type) error, `toml: line 2 (last key "a.b"): …`.
var typeErrorLocRE = regexp.MustCompile(`^toml: line (\d+) \(last key "(.*)"\): `)

// decodeTypeErrors reports every wrong-typed value of data, not only the
// first one err (the first decode's) names: the TOML decoder stops at the
// first, so the line holding it is blanked (its newline kept, every other
// line keeping its number) and the file decoded again, until a decode
// ends on no type error. A value spanning several lines (a multi-line
// array or string) cannot be blanked that way: the errors found until then
// are reported, in file order. Each problem is the full key path, its line and what is
// wrong, with the unit of a duration key given as a string ("2h" for a
// number of minutes). It returns err rewritten (decodeError) when err is
// no type error; a config.Errors otherwise.
func decodeTypeErrors(data []byte, err error, secrets []string) error {
	var es Errors
	var lines []int // es[i]'s line: the decoder's order is not the file's
	seen := map[int]bool{}
	for err != nil && len(es) < maxTypeErrors {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			break // a syntax error: its Error() reads like a type error's
		}
		m := typeErrorLocRE.FindStringSubmatch(err.Error())
		if m == nil {
			break // not a type error (or no line): nothing more to blank
		}
		line, _ := strconv.Atoi(m[1])
		if seen[line] {
			break
		}
		seen[line] = true
		es = append(es, typeError(err, m[2], secrets))
		lines = append(lines, line)
		data = blankLine(data, line)
		var root fileRoot
		root.Hatchery.VSphere.Config = Default()
		_, err = toml.NewDecoder(bytes.NewReader(data)).Decode(&root)
	}
	if len(es) == 0 {
		return decodeError(err, secrets)
	}
	idx := make([]int, len(es))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return lines[idx[a]] < lines[idx[b]] })
	out := make(Errors, len(es))
	for i, j := range idx {
		out[i] = es[j]
	}
	return out
}

// typeError is one wrong-typed value as a FieldError: its key path, and
// "line N: problem" with the unit hint of a duration key.
func typeError(err error, key string, secrets []string) FieldError {
	msg := decodeError(err, secrets).Error() // "line N: key: problem"
	line, rest, _ := strings.Cut(msg, ": ")
	problem := strings.TrimPrefix(rest, key+": ")
	if hint := durationHint(key); hint != "" {
		problem += "; " + hint
	}
	return FieldError{Key: key, Problem: line + ": " + problem}
}

// durationHint tells the unit of a duration key (a full key path), "" for
// another key: its values are plain numbers, "2h" is refused.
func durationHint(key string) string {
	rel, ok := strings.CutPrefix(key, KeyPrefix+".")
	if !ok {
		return ""
	}
	for _, d := range durationKeys {
		if strings.EqualFold(d.key, rel) {
			return fmt.Sprintf("want a number of %s, e.g. %d", d.unitName, d.def)
		}
	}
	return ""
}

// blankLine returns data with its line n (from 1) emptied, its newline
// kept.
func blankLine(data []byte, n int) []byte {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n < 1 || n > len(lines) {
		return data
	}
	out := make([]byte, 0, len(data))
	for i, l := range lines {
		if i == n-1 {
			if bytes.HasSuffix(l, []byte("\n")) {
				out = append(out, '\n')
			}
			continue
		}
		out = append(out, l...)
	}
	return out
}
