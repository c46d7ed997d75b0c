// Package testutil holds small helpers shared by the project's tests.
package testutil

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is an output stream (log sink, command output) safe for
// concurrent writers and a reading test. The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the lines written so far that hold every one of parts (a
// log's lines about one decision, say), in order; none given, every line.
func (s *SyncBuffer) Lines(parts ...string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		all := l != ""
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}
