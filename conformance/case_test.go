package conformance

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// TestRunCaseOutcomes checks the CLI runner's own T: pass, Errorf, Fatalf,
// Skipf, a panic and a timeout each give the right status and message, and
// cleanups always run.
func TestRunCaseOutcomes(t *testing.T) {
	h := Harness{NewStore: func(t T) *stream.Store { t.Fatalf("not used"); return nil }}
	for _, tc := range []struct {
		name    string
		run     func(e *env)
		status  Status
		message string
	}{
		{"pass", func(e *env) { e.t.Logf("fine") }, StatusPass, ""},
		{"errorf", func(e *env) { e.t.Errorf("first %d", 1); e.t.Errorf("second") }, StatusFail, "first 1"},
		{"fatalf", func(e *env) { e.t.Fatalf("stop here"); panic("not reached") }, StatusFail, "stop here"},
		{"skipf", func(e *env) { e.t.Skipf("driver declares no X"); panic("not reached") }, StatusSkip, "driver declares no X"},
		{"panic", func(e *env) { panic("boom") }, StatusFail, "panic: boom"},
		{"timeout", func(e *env) { <-e.ctx.Done() }, StatusFail, "case timed out after"},
		{"skip after an error fails", func(e *env) { e.t.Errorf("broken"); e.t.Skipf("skip") }, StatusFail, "broken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cleaned atomic.Bool
			c := Case{Family: "test", Name: tc.name, run: func(e *env) {
				e.t.Cleanup(func() { cleaned.Store(true) })
				tc.run(e)
			}}
			r := RunCase(context.Background(), h, c, RunOptions{Seed: 7, Timeout: 200 * time.Millisecond})
			if r.Status != tc.status || !strings.HasPrefix(r.Error, tc.message) {
				t.Fatalf("status %s error %q, want %s %q", r.Status, r.Error, tc.status, tc.message)
			}
			if !cleaned.Load() {
				t.Fatalf("cleanup did not run")
			}
			if r.Seed != 7 || r.Case.FullName() != "test/"+tc.name {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

// TestRandomisedCaseLogsSeed: a failing randomised case tells how to replay.
func TestRandomisedCaseLogsSeed(t *testing.T) {
	var first, second uint64
	c := Case{Family: "test", Name: "rand", Randomised: true, run: func(e *env) {
		if first == 0 {
			first = e.rng.Uint64()
		} else {
			second = e.rng.Uint64()
		}
		e.t.Errorf("failed")
	}}
	h := Harness{NewStore: func(t T) *stream.Store { return nil }}
	r := RunCase(context.Background(), h, c, RunOptions{Seed: 99})
	if !strings.Contains(strings.Join(r.Log, "\n"), "--seed 99") {
		t.Fatalf("log does not name the seed: %q", r.Log)
	}
	RunCase(context.Background(), h, c, RunOptions{Seed: 99})
	if first != second {
		t.Fatalf("same seed gave different draws: %d, %d", first, second)
	}
}

// TestCaseCatalogue: names are unique and well-formed, every family is
// known and has cases, and the suite has at least 40.
func TestCaseCatalogue(t *testing.T) {
	cases := Cases()
	if len(cases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(cases))
	}
	seen := map[string]bool{}
	perFamily := map[string]int{}
	for _, c := range cases {
		if seen[c.FullName()] {
			t.Fatalf("duplicate case %s", c.FullName())
		}
		seen[c.FullName()] = true
		perFamily[c.Family]++
		if c.Doc == "" || c.Suite != SuiteStream || strings.ContainsAny(c.Name, "/ ") {
			t.Fatalf("case %+v: needs a Doc, the stream suite and a name without '/' or spaces", c)
		}
	}
	for _, f := range familyOrder {
		if perFamily[f] == 0 {
			t.Fatalf("family %s has no cases", f)
		}
	}
	if len(perFamily) != len(familyOrder) {
		t.Fatalf("families %v, want %v", perFamily, familyOrder)
	}
	sel, err := Select(cases, "^fencing/")
	if err != nil || len(sel) != perFamily[FamilyFencing] {
		t.Fatalf("Select(^fencing/) = %d cases, %v", len(sel), err)
	}
}
