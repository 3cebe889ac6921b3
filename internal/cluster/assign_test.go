package cluster

import (
	"fmt"
	"testing"
)

func units(n int) []string {
	var us []string
	for i := range n {
		us = append(us, fmt.Sprintf("p/t/%d", i))
	}
	return us
}

// loads counts the units of each node and checks every unit is assigned
// to one of nodes, each node within one unit of the others.
func checkBalanced(t *testing.T, us []string, nodes []int32, got map[string]int32) map[int32]int {
	t.Helper()
	if len(got) != len(us) {
		t.Fatalf("assigned %d units, want %d", len(got), len(us))
	}
	load := map[int32]int{}
	ok := map[int32]bool{}
	for _, n := range nodes {
		ok[n] = true
		load[n] += 0
	}
	for _, u := range us {
		n, found := got[u]
		if !found || !ok[n] {
			t.Fatalf("unit %s assigned to %d (found %v), not one of %v", u, n, found, nodes)
		}
		load[n]++
	}
	lo, hi := len(us), 0
	for _, l := range load {
		lo, hi = min(lo, l), max(hi, l)
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced loads %v", load)
	}
	return load
}

func moves(a, b map[string]int32) int {
	n := 0
	for u, o := range a {
		if b[u] != o {
			n++
		}
	}
	return n
}

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		name      string
		units     int
		before    []int32
		after     []int32
		maxMoves  int // of the change from before to after
		wantMoves int // -1: not checked exactly
	}{
		{"join one of three", 256, []int32{1, 2}, []int32{1, 2, 3}, 86, 85},
		{"leave one of three", 256, []int32{1, 2, 3}, []int32{1, 3}, 86, -1},
		{"same nodes", 100, []int32{1, 2, 3}, []int32{3, 2, 1}, 0, 0},
		{"fewer units than nodes", 2, []int32{1, 2, 3}, []int32{1, 2, 3, 4}, 0, 0},
		{"all replaced", 10, []int32{1, 2}, []int32{3, 4}, 10, 10},
		{"one node", 7, []int32{5}, []int32{5, 6}, 3, 3},
		{"no units", 0, []int32{1}, []int32{1, 2}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := units(tc.units)
			a := Assign(us, tc.before, nil)
			checkBalanced(t, us, tc.before, a)
			b := Assign(us, tc.after, a)
			checkBalanced(t, us, tc.after, b)
			m := moves(a, b)
			if m > tc.maxMoves || (tc.wantMoves >= 0 && m != tc.wantMoves) {
				t.Fatalf("%d moves, want at most %d (exactly %d)", m, tc.maxMoves, tc.wantMoves)
			}
			if again := Assign(us, tc.after, b); moves(b, again) != 0 {
				t.Fatalf("a stable assignment moved %d units when recomputed", moves(b, again))
			}
		})
	}
}

func TestAssignNoNodes(t *testing.T) {
	if got := Assign(units(3), nil, nil); len(got) != 0 {
		t.Fatalf("Assign with no nodes = %v, want empty", got)
	}
}

// TestAssignUnbalancedCurrent starts from everything on one node: the
// result is balanced and that node keeps its share.
func TestAssignUnbalancedCurrent(t *testing.T) {
	us := units(9)
	cur := map[string]int32{}
	for _, u := range us {
		cur[u] = 1
	}
	got := Assign(us, []int32{1, 2, 3}, cur)
	load := checkBalanced(t, us, []int32{1, 2, 3}, got)
	if load[1] != 3 || moves(cur, got) != 6 {
		t.Fatalf("loads %v, moves %d; want node 1 to keep 3 and 6 to move", load, moves(cur, got))
	}
}
