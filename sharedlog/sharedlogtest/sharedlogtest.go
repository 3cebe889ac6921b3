// Package sharedlogtest is the SharedLog conformance suite: Kafka
// partition-log cases (package sharedlog) run on top of any driver's
// stream.Store. It takes the same conformance.Harness as the stream suite,
// and runs both from `go test` (Run) and from the `strata conformance
// --suite sharedlog` CLI (Cases + RunCase). It also holds test data for
// sharedlog: record batches built with franz-go's kmsg (Build) and batches
// produced by a real franz-go client (FranzSamples).
//
// It is not a test of the stream contract itself (package conformance) and
// not a benchmark.
package sharedlogtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stratastream/strata/conformance"
)

// Suite is the suite name of these cases (`--suite sharedlog`).
const Suite = "sharedlog"

// Families of the SharedLog suite, in run order.
const (
	FamilyBadInput     = "badinput"
	FamilyAppend       = "append"
	FamilyIdempotence  = "idempotence"
	FamilyTransactions = "transactions"
	FamilyOffsets      = "offsets"
	FamilyRetention    = "retention"
	FamilyTakeover     = "takeover"
)

// Case is one SharedLog conformance case.
type Case struct {
	// Family groups related cases.
	Family string
	// Name is the case's name within its family.
	Name string
	// Doc says in one line what the case checks.
	Doc string

	run func(e *env)
}

// FullName is "family/name", the subtest name and the name --run matches.
func (c Case) FullName() string { return c.Family + "/" + c.Name }

// Conformance describes c as a conformance.Case of suite "sharedlog" (for
// reports; run it with RunCase).
func (c Case) Conformance() conformance.Case {
	return conformance.Case{Suite: Suite, Family: c.Family, Name: c.Name, Doc: c.Doc}
}

// Cases returns every case of the suite in run order.
func Cases() []Case {
	var out []Case
	for _, f := range [][]Case{badInputCases(), appendCases(), idempotenceCases(), transactionCases(), offsetCases(), retentionCases(), takeoverCases()} {
		out = append(out, f...)
	}
	return out
}

// Select returns the cases whose FullName matches pattern (unanchored; empty
// selects all).
func Select(cases []Case, pattern string) ([]Case, error) {
	if pattern == "" {
		return cases, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("sharedlogtest: bad case pattern %q: %w", pattern, err)
	}
	var out []Case
	for _, c := range cases {
		if re.MatchString(c.FullName()) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run runs every case against the driver the harness opens, each as the
// subtest "family/name". A driver's test calls it next to conformance.Run:
//
//	func TestSharedLog(t *testing.T) { sharedlogtest.Run(t, harness) }
func Run(t *testing.T, h conformance.Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("sharedlogtest: Harness.NewStore is nil")
	}
	run := newRunID()
	for _, c := range Cases() {
		t.Run(c.FullName(), func(t *testing.T) { runCase(t, h, c, run) })
	}
}

// RunCase runs one case outside `go test` (the CLI's --suite sharedlog) and
// returns its outcome in the stream suite's Result form: Fatalf and Skipf
// stop the case, a panic fails it, and a case outliving opts.Timeout
// (default 5 minutes) fails. opts.Seed is unused (no case is randomised).
func RunCase(ctx context.Context, h conformance.Harness, c Case, opts conformance.RunOptions) conformance.Result {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	run := opts.RunID
	if run == "" {
		run = newRunID()
	}
	ct := newCaseT(ctx, c.FullName())
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				buf := make([]byte, 16<<10)
				ct.fail(fmt.Sprintf("panic: %v\n%s", r, buf[:runtime.Stack(buf, false)]))
			}
		}()
		if h.NewStore == nil {
			ct.Fatalf("sharedlogtest: Harness.NewStore is nil")
		}
		runCase(ct, h, c, run)
	}()
	timer := time.NewTimer(opts.Timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		ct.fail(fmt.Sprintf("case timed out after %v", opts.Timeout))
		ct.cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
	ct.runCleanups()
	res := conformance.Result{Case: c.Conformance(), Duration: time.Since(start), Seed: opts.Seed}
	res.Status, res.Error, res.Log = ct.outcome()
	return res
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runCase sets up the env of c on t and runs it.
func runCase(t conformance.T, h conformance.Harness, c Case, run string) {
	t.Helper()
	e := &env{t: t, h: h, ctx: t.Context(), prefix: "sharedlog/" + run + "/" + c.FullName(), crashed: map[any]bool{}}
	c.run(e)
}
