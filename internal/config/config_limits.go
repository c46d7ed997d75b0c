package config

import "fmt"

// Bounds on the raw configuration, checked before the TOML parser sees it.
// The parser recurses once per nested array or inline table, and deeply
// nested input makes it overflow the stack or grow without bound; a real
// configuration is a few KB deep by two or three levels.
const (
	// maxConfigBytes bounds the file size: a configuration is a few KB,
	// anything near this is a wrong file.
	maxConfigBytes = 1 << 20
	// maxConfigNesting bounds how deeply arrays and inline tables nest
	// (a [[table]] header counts two).
	maxConfigNesting = 16
	// maxConfigItems bounds the keys, tables and array elements of a file
	// (counted as '=', ',', '[' and '{' outside strings and comments): the
	// parser's and the key checks' work grows faster than the item count,
	// and the reference configuration has a few hundred.
	maxConfigItems = 10000
)

// checkShape scans TOML text and returns an error naming the line where
// arrays or inline tables nest deeper than maxDepth, or where the file
// passes maxItems items (see maxConfigItems). It skips comments and every
// form of string (basic, literal and their multi-line forms), so that
// brackets inside them do not count. It does not validate the syntax: that
// is the parser's job once the depth is known to be safe.
func checkShape(data []byte, maxDepth, maxItems int) error {
	depth, line, items := 0, 1, 0
	n := len(data)
	for i := 0; i < n; i++ {
		switch c := data[i]; c {
		case '\n':
			line++
		case '#':
			for i+1 < n && data[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			if i+2 < n && data[i+1] == c && data[i+2] == c {
				i, line = skipMultiline(data, i+3, c, line)
			} else {
				i = skipString(data, i+1, c)
			}
		case '[', '{', '=', ',':
			if items++; items > maxItems {
				return fmt.Errorf("line %d: more than %d keys, tables and array elements (a configuration has a few hundred)", line, maxItems)
			}
			if c == '[' || c == '{' {
				depth++
			}
			if depth > maxDepth {
				return fmt.Errorf("line %d: arrays or inline tables nested more than %d deep (a configuration needs three levels at most)", line, maxDepth)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

// skipString returns the index of the quote closing a one-line string
// opened before i (or of the end of the line when it is unterminated). In a
// basic string ('"') a backslash escapes the next byte.
func skipString(data []byte, i int, quote byte) int {
	for ; i < len(data); i++ {
		switch data[i] {
		case quote:
			return i
		case '\n':
			return i - 1
		case '\\':
			if quote == '"' {
				i++
			}
		}
	}
	return i
}

// skipMultiline returns the index of the last quote of the three closing a
// multi-line string opened before i, counting the lines it spans.
func skipMultiline(data []byte, i int, quote byte, line int) (int, int) {
	for ; i < len(data); i++ {
		switch data[i] {
		case '\n':
			line++
		case '\\':
			if quote == '"' {
				i++
				if i < len(data) && data[i] == '\n' {
					line++
				}
			}
		case quote:
			if i+2 < len(data) && data[i+1] == quote && data[i+2] == quote {
				// Up to two more quotes may close it ("""" ends with a quote inside).
				i += 2
				for i+1 < len(data) && data[i+1] == quote {
					i++
				}
				return i, line
			}
		}
	}
	return i, line
}
