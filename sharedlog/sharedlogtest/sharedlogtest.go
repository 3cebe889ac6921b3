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
	"slices"
	"testing"

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

var familyOrder = []string{FamilyBadInput, FamilyAppend, FamilyIdempotence, FamilyTransactions, FamilyOffsets, FamilyRetention, FamilyTakeover}

// Cases returns every case of the suite in run order (family order, then
// the order each family lists them).
func Cases() []Case {
	var out []Case
	for _, f := range [][]Case{badInputCases(), appendCases(), idempotenceCases(), producerIDCases(), transactionCases(), offsetCases(), retentionCases(), takeoverCases(), checkpointCases(), brokerCases()} {
		out = append(out, f...)
	}
	slices.SortStableFunc(out, func(a, b Case) int {
		return slices.Index(familyOrder, a.Family) - slices.Index(familyOrder, b.Family)
	})
	return out
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

// RunCase runs one case outside `go test` (the CLI's --suite sharedlog)
// with the stream suite's runner (conformance.RunFunc): Fatalf and Skipf
// stop the case, a panic fails it, and a case outliving opts.Timeout
// (default 5 minutes) fails. opts.Seed is unused (no case is randomised);
// opts.RunID names the run in stream names (empty: a fresh one).
func RunCase(ctx context.Context, h conformance.Harness, c Case, opts conformance.RunOptions) conformance.Result {
	if opts.RunID == "" {
		opts.RunID = newRunID()
	}
	return conformance.RunFunc(ctx, c.Conformance(), opts, func(t conformance.T) {
		if h.NewStore == nil {
			t.Fatalf("sharedlogtest: Harness.NewStore is nil")
		}
		runCase(t, h, c, opts.RunID)
	})
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
