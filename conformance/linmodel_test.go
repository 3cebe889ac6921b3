package conformance

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// linOp builds a history entry for the log model.
func linOp(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func openOp(s int, call, ret, start, next int64) porcupine.Operation {
	return linOp(99, call, ret, linInput{Kind: linOpen, Session: s}, linOutput{Start: start, Next: next})
}

func appendOp(client, s int, call, ret, id int64, out linOutput) porcupine.Operation {
	return linOp(client, call, ret, linInput{Kind: linAppend, Session: s, ID: id, Count: 1}, out)
}

func fetchAll(call, ret int64, got ...linBatch) porcupine.Operation {
	return linOp(98, call, ret, linInput{Kind: linFetch, Offset: 0, MaxBytes: 1 << 20}, linOutput{Got: got})
}

// TestLinModelResolvedFenced checks the model's handling of fenced appends
// whose fate the final read settled: landed only while the session was
// current and at the offset read, not landed leaves the log alone.
func TestLinModelResolvedFenced(t *testing.T) {
	landedAt := func(base int64) linOutput {
		return linOutput{Fenced: true, Resolved: true, Landed: true, Base: base}
	}
	notLanded := linOutput{Fenced: true, Resolved: true}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"landed, overlapping the fence", []porcupine.Operation{
			openOp(1, 0, 1, 0, 0),
			appendOp(0, 1, 2, 10, 7, landedAt(0)),
			openOp(2, 3, 5, 0, 1),
			fetchAll(11, 12, linBatch{Base: 0, ID: 7}),
		}, porcupine.Ok},
		{"landed, wholly after the fence", []porcupine.Operation{
			openOp(1, 0, 1, 0, 0),
			openOp(2, 3, 5, 0, 0),
			appendOp(0, 1, 6, 10, 7, landedAt(0)),
			fetchAll(11, 12, linBatch{Base: 0, ID: 7}),
		}, porcupine.Illegal},
		{"claimed landed, final read disagrees", []porcupine.Operation{
			openOp(1, 0, 1, 0, 0),
			appendOp(0, 1, 2, 10, 7, landedAt(0)),
			openOp(2, 3, 11, 0, 1),
			appendOp(0, 2, 12, 13, 8, linOutput{Base: 1}),
			fetchAll(14, 15, linBatch{Base: 0, ID: 8}),
		}, porcupine.Illegal},
		{"not landed", []porcupine.Operation{
			openOp(1, 0, 1, 0, 0),
			appendOp(0, 1, 2, 10, 7, notLanded),
			openOp(2, 3, 5, 0, 0),
			appendOp(0, 2, 12, 13, 8, linOutput{Base: 0}),
			fetchAll(14, 15, linBatch{Base: 0, ID: 8}),
		}, porcupine.Ok},
		{"not landed, but an open saw it", []porcupine.Operation{
			openOp(1, 0, 1, 0, 0),
			appendOp(0, 1, 2, 3, 7, notLanded),
			openOp(2, 4, 5, 0, 1),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(linModel, tc.ops, time.Minute); got != tc.want {
				t.Fatalf("check = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLinModelManyFenced is the history shape that used to hang the check:
// many fenced appends of the current session overlapping one slow open.
// Unresolved, each doubles the model's state set; resolved, the check is a
// plain walk.
func TestLinModelManyFenced(t *testing.T) {
	ops := []porcupine.Operation{openOp(1, 0, 1, 0, 0)}
	const n = 64
	var got []linBatch
	next := int64(0)
	for i := range int64(n) {
		out := linOutput{Fenced: true, Resolved: true}
		if i%5 == 0 {
			out.Landed, out.Base = true, next
			got = append(got, linBatch{Base: next, ID: i})
			next++
		}
		ops = append(ops, appendOp(int(i%2), 1, 2+2*i, 3+2*i, i, out))
	}
	ops = append(ops, openOp(2, 2, 4*n, 0, next), fetchAll(4*n+1, 4*n+2, got...))
	if res := porcupine.CheckOperationsTimeout(linModel, ops, time.Minute); res != porcupine.Ok {
		t.Fatalf("check of %d fenced appends = %v, want ok", n, res)
	}
}
