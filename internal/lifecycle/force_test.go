package lifecycle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExpireIsChecked: Expire is a move to Gone like any other: a phase
// the transitions table does not let go to Gone (Started: only a deletion
// ends it) never expires, whatever its deadline. Without the check in
// Expire, the Started entry would be removed.
func TestExpireIsChecked(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tb := New(func() time.Time { return now })
	require.NoError(t, tb.Move("w", Gone, Started, WithDeadline(now)))
	gone, err := tb.Expire(Started, now.Add(time.Hour))
	require.ErrorIs(t, err, ErrNotAllowed)
	assert.Empty(t, gone)
	assert.Equal(t, Started, tb.Phase("w"))
}

// TestMustRecordsRefusals: a refused Must changes nothing, is kept in
// Bugs and told to OnBug; an accepted one leaves no trace.
func TestMustRecordsRefusals(t *testing.T) {
	tb := New(nil)
	var told []error
	tb.OnBug(func(err error) { told = append(told, err) })
	tb.Must("w", Gone, Running)
	assert.Empty(t, tb.Bugs())
	tb.Must("w", Gone, Cloning) // w is Running
	tb.Must("w", Running, Idle) // not in the table
	require.Len(t, tb.Bugs(), 2)
	assert.ErrorIs(t, tb.Bugs()[0], ErrWrongPhase)
	assert.ErrorIs(t, tb.Bugs()[1], ErrNotAllowed)
	assert.Equal(t, tb.Bugs(), told)
	assert.Equal(t, Running, tb.Phase("w"))
}

// TestDrop: dropping a VM from its phase removes it; an entry already gone
// is no error; an entry in another phase is refused and kept.
func TestDrop(t *testing.T) {
	tb := New(nil)
	require.NoError(t, tb.Move("c", Gone, Claimed))
	require.NoError(t, tb.Drop("c", Claimed))
	assert.Equal(t, Gone, tb.Phase("c"))
	require.NoError(t, tb.Drop("c", Claimed), "already gone")
	require.NoError(t, tb.Move("m", Gone, Marked))
	require.ErrorIs(t, tb.Drop("m", Claimed), ErrWrongPhase)
	assert.Equal(t, Marked, tb.Phase("m"))
}

// TestGroupsAgreeWithTransitions: every phase of a group the loops move
// VMs out of can make that move in the transitions table: a group naming a
// phase the table does not let go there (or a table dropping a move a
// group relies on) fails here.
func TestGroupsAgreeWithTransitions(t *testing.T) {
	for name, g := range map[string]struct {
		phases []Phase
		to     []Phase
	}{
		"markable":  {Markable(), []Phase{Marked}},
		"deletable": {Deletable(), []Phase{Deleting}},
		"claimable": {Claimable(), []Phase{Claimed, Marked}},
	} {
		for _, p := range g.phases {
			for _, to := range g.to {
				assert.True(t, Allowed(p, to), "%s: %s -> %s", name, p, to)
			}
		}
	}
	// The groups' complements: a phase left out of markable cannot be
	// marked (or is marked already), one left out of deletable is owned by
	// the loop working on it.
	for _, p := range Phases() {
		if !containsPhase(Markable(), p) {
			assert.False(t, Allowed(p, Marked) && p != Deleting, "%s may be marked: list it in Markable", p)
		}
	}
	for _, p := range []Phase{Cloning, Provisioning, Claimed, Preparing, Deleting} {
		assert.NotContains(t, Deletable(), p)
	}
	assert.Equal(t, []Phase{Marked, Deleting, Destroyed}, Removed())
	assert.Equal(t, []Phase{Deleting, Destroyed}, Destroying())
}

// TestSpawnInFlight: one spawn per job key at a time, from any number of
// goroutines; the job is free again once the spawn ends.
func TestSpawnInFlight(t *testing.T) {
	tb := New(nil)
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tb.BeginSpawn("42") {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, won)
	assert.True(t, tb.SpawnInFlight("42"))
	assert.False(t, tb.SpawnInFlight("43"))
	tb.EndSpawn("42")
	assert.False(t, tb.SpawnInFlight("42"))
	assert.True(t, tb.BeginSpawn("42"))
}

// TestNoMoveDiscardsItsRefusal reads every non-test Go file of the
// repository's internal packages and fails on a call of Move, MoveFrom,
// MoveAny, Drop or Expire on a lifecycle table whose result is thrown away
// (a bare call statement, or assigned to blanks only): each refusal is
// handled where it happens, or the move is a Must.
func TestNoMoveDiscardsItsRefusal(t *testing.T) {
	checked := map[string]bool{"Move": true, "MoveFrom": true, "MoveAny": true, "Drop": true, "Expire": true}
	root := filepath.Join("..")
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		isMove := func(e ast.Expr) bool {
			call, ok := e.(*ast.CallExpr)
			if !ok {
				return false
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !checked[sel.Sel.Name] {
				return false
			}
			// h.life.X, p.Life.X, tb.X: a receiver naming the table.
			switch r := sel.X.(type) {
			case *ast.SelectorExpr:
				return r.Sel.Name == "life" || r.Sel.Name == "Life"
			case *ast.Ident:
				return r.Name == "life" || r.Name == "Life"
			}
			return false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch s := n.(type) {
			case *ast.ExprStmt:
				if isMove(s.X) {
					bad = append(bad, fset.Position(s.Pos()).String())
				}
			case *ast.DeferStmt:
				if isMove(s.Call) {
					bad = append(bad, fset.Position(s.Pos()).String())
				}
			case *ast.AssignStmt:
				if len(s.Rhs) == 1 && isMove(s.Rhs[0]) {
					blank := true
					for _, l := range s.Lhs {
						if id, ok := l.(*ast.Ident); !ok || id.Name != "_" {
							blank = false
						}
					}
					if blank {
						bad = append(bad, fset.Position(s.Pos()).String())
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, bad, "lifecycle moves whose refusal is discarded")
}
