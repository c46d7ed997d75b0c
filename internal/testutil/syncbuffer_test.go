package testutil

import (
	"strings"
	"sync"
	"testing"
)

func TestSyncBufferConcurrentWriters(t *testing.T) {
	t.Parallel()
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				_, _ = b.Write([]byte("x"))
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("got %d bytes, want 800", len(got))
	}
}

// TestSyncBufferLines: Lines keeps the lines holding every part, in
// order, and never the empty line after the last newline.
func TestSyncBufferLines(t *testing.T) {
	t.Parallel()
	var b SyncBuffer
	_, _ = b.Write([]byte("level=INFO msg=a job=1\nlevel=WARN msg=a job=2\nlevel=WARN msg=b job=1\n"))
	got := b.Lines("level=WARN", "msg=a")
	if len(got) != 1 || got[0] != "level=WARN msg=a job=2" {
		t.Errorf("Lines(WARN, a) = %q", got)
	}
	if got := b.Lines("job=1"); len(got) != 2 || got[0] != "level=INFO msg=a job=1" || got[1] != "level=WARN msg=b job=1" {
		t.Errorf("Lines(job=1) = %q", got)
	}
	if got := b.Lines(); len(got) != 3 {
		t.Errorf("Lines() = %q, want the 3 lines", got)
	}
	if got := b.Lines("absent"); got != nil {
		t.Errorf("Lines(absent) = %q, want none", got)
	}
}
