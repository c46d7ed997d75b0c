package testutil

import (
	"errors"
	"sync"
	"testing"
)

// TestCallLog: calls are listed in order as "verb object"; each verb
// answers its queued errors one a call, then nil; List is a copy.
func TestCallLog(t *testing.T) {
	t.Parallel()
	var l CallLog
	boom, bang := errors.New("boom"), errors.New("bang")
	l.Fail("destroy", boom, bang)
	if err := l.Call("shutdown", "vm-a"); err != nil {
		t.Errorf("shutdown: %v, want nil (nothing queued)", err)
	}
	for _, want := range []error{boom, bang, nil} {
		if err := l.Call("destroy", "vm-a"); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("destroy: %v, want %v", err, want)
		}
	}
	got := l.List()
	want := []string{"shutdown vm-a", "destroy vm-a", "destroy vm-a", "destroy vm-a"}
	if len(got) != len(want) {
		t.Fatalf("List() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("List()[%d] = %q, want %q", i, got[i], want[i])
		}
	}
	got[0] = "changed"
	if l.List()[0] != "shutdown vm-a" {
		t.Error("List returns the log itself, not a copy")
	}

	// Concurrent callers (run with -race): every call is kept.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.Call("record", "vm-b")
		}()
	}
	wg.Wait()
	if n := len(l.List()); n != len(want)+8 {
		t.Errorf("%d calls, want %d", n, len(want)+8)
	}
}
