package conformance

import (
	"errors"
	"fmt"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyDurability,
	Case{Name: "crash-after-acks", Doc: "every acked batch is back after a crash, same bytes at the same offsets", run: caseCrashAfterAcks},
	Case{Name: "crash-inflight", Doc: "a crash with appends in flight keeps every ack, the log is contiguous and readers agree", Randomised: true, run: caseCrashInflight},
	Case{Name: "crash-keeps-trim", Doc: "a trim acked before a crash is still in effect after it", run: caseCrashKeepsTrim},
	Case{Name: "crash-same-epoch", Doc: "an owner recovers by reopening with its own epoch after a crash and appends on at NextOffset", run: caseCrashSameEpoch},
	Case{Name: "crash-repeated", Doc: "rounds of appends and crashes with rising epochs accumulate one intact log", Randomised: true, run: caseCrashRepeated},
	Case{Name: "crash-keeps-namespace", Doc: "creates and deletes acked before a crash are still in effect after it", run: caseCrashKeepsNamespace},
)

// outcome is one append of a session whose fate the case inspects later.
type outcome struct {
	Batch stream.Batch
	Res   stream.AppendResult
	Err   error
}

// collect waits for every future (up to the case context) and pairs the
// results with their batches.
func (e *env) collect(futs []*stream.AppendFuture, bs []stream.Batch) []outcome {
	e.t.Helper()
	out := make([]outcome, len(futs))
	for i, f := range futs {
		r, err := f.Wait(e.ctx)
		if e.ctx.Err() != nil {
			e.t.Fatalf("append %d never completed: %v", i, err)
		}
		out[i] = outcome{Batch: bs[i], Res: r, Err: err}
	}
	return out
}

// checkOldSession checks the appends of a session that a newer session
// (opened with NextOffset newNext) superseded: acks are a prefix in call
// order with contiguous offsets, every ack lies below newNext, and failures
// match one of allowed. It returns the acked appends.
func checkOldSession(outs []outcome, newNext int64, allowed ...error) ([]acked, error) {
	var acks []acked
	failedAt := -1
	for i, o := range outs {
		if o.Err != nil {
			if failedAt < 0 {
				failedAt = i
			}
			ok := false
			for _, a := range allowed {
				ok = ok || errors.Is(o.Err, a)
			}
			if !ok {
				return acks, fmt.Errorf("old session's append %d failed with %v, want one of %v", i, o.Err, allowed)
			}
			continue
		}
		if failedAt >= 0 {
			return acks, fmt.Errorf("old session's append %d acked at %d after append %d failed (a gap)", i, o.Res.BaseOffset, failedAt)
		}
		if len(acks) > 0 && o.Res.BaseOffset != acks[len(acks)-1].Base+int64(acks[len(acks)-1].Batch.Count) {
			return acks, fmt.Errorf("old session's append %d acked at %d, not after the previous ack", i, o.Res.BaseOffset)
		}
		if o.Res.NextOffset > newNext {
			return acks, fmt.Errorf("old session's append %d acked at [%d,%d), above the new session's NextOffset %d at open (acked after the fence)", i, o.Res.BaseOffset, o.Res.NextOffset, newNext)
		}
		acks = append(acks, acked{Base: o.Res.BaseOffset, Batch: o.Batch})
	}
	return acks, nil
}

func caseCrashAfterAcks(e *env) {
	s := e.store()
	e.needCrash(s)
	name := e.name("s")
	st := e.open(s, name, 1)
	acks := e.appendMany(st, "caa", e.h.scaled(100), 500)
	acks = append(acks, e.appendOK(st, batch("caa-last", 0, 700)))
	end := st.NextOffset()
	s2 := e.crash(s)
	st2 := e.open(s2, name, 2)
	if st2.NextOffset() < end {
		e.t.Fatalf("NextOffset %d after crash, below the last acked end %d", st2.NextOffset(), end)
	}
	log := e.readAll(st2)
	if err := contiguous(log); err != nil {
		e.t.Fatalf("log after crash: %v", err)
	}
	e.checkHolds("log after crash", log, acks)
}

func caseCrashInflight(e *env) {
	s := e.store()
	e.needCrash(s)
	name := e.name("s")
	st := e.open(s, name, 1)
	n := e.h.scaled(200)
	waitFor := e.rng.IntN(n)
	futs := make([]*stream.AppendFuture, n)
	bs := make([]stream.Batch, n)
	for i := range n {
		bs[i] = batch("cif", i, 16+e.rng.IntN(4000))
		futs[i] = st.Append(e.ctx, bs[i])
	}
	if _, err := futs[waitFor].Wait(e.ctx); err != nil {
		e.t.Fatalf("append %d before the crash: %v", waitFor, err)
	}
	s2 := e.crash(s)
	st2 := e.open(s2, name, 2)
	newNext := st2.NextOffset()
	outs := e.collect(futs, bs)
	acks, err := checkOldSession(outs, newNext, stream.ErrFenced, stream.ErrUnavailable, stream.ErrClosed)
	if err != nil {
		e.t.Fatalf("crashed session: %v", err)
	}
	if len(acks) <= waitFor {
		e.t.Fatalf("append %d was acked before the crash but the session reports only %d acks", waitFor, len(acks))
	}
	log := e.readAll(st2)
	if err := contiguous(log); err != nil {
		e.t.Fatalf("log after crash: %v", err)
	}
	e.checkHolds("log after crash", log, acks)
	if len(log) > 0 && log[len(log)-1].EndOffset() != newNext {
		e.t.Fatalf("log after crash ends at %d, NextOffset says %d", log[len(log)-1].EndOffset(), newNext)
	}
	// Another store on the namespace reads the same log.
	if e.h.Second != nil && s2.Info().ReadOnlyOpen {
		r := e.openRO(e.second(s2), name)
		if err := sameLog(e.readAll(r), log); err != nil {
			e.t.Fatalf("a reader in a second store disagrees with the owner after the crash: %v", err)
		}
	}
}

func caseCrashKeepsTrim(e *env) {
	s := e.store()
	e.needCrash(s)
	name := e.name("s")
	st := e.open(s, name, 1)
	acks := e.appendMany(st, "ckt", 30, 100)
	trimTo := acks[10].Base + 1
	if err := st.Trim(e.ctx, trimTo); err != nil {
		e.t.Fatalf("Trim(%d): %v", trimTo, err)
	}
	s2 := e.crash(s)
	st2 := e.open(s2, name, 2)
	if st2.StartOffset() < trimTo {
		e.t.Fatalf("StartOffset %d after crash, below the acked trim to %d", st2.StartOffset(), trimTo)
	}
	_, err := st2.Fetch(e.ctx, trimTo-1, stream.NoEnd, 0)
	e.wantErr("Fetch below the trim after a crash", err, stream.ErrOffsetOutOfRange)
	e.checkHolds("log after crash", e.readAll(st2), acks[11:])
}

func caseCrashSameEpoch(e *env) {
	s := e.store()
	e.needCrash(s)
	name := e.name("s")
	st := e.open(s, name, 5)
	acks := e.appendMany(st, "cse", 40, 200)
	end := st.NextOffset()
	s2 := e.crash(s)
	st2 := e.open(s2, name, 5)
	if st2.NextOffset() < end {
		e.t.Fatalf("NextOffset %d after same-epoch recovery, below the acked end %d", st2.NextOffset(), end)
	}
	next := st2.NextOffset()
	a := e.appendOK(st2, batch("cse-after", 0, 100))
	if a.Base != next {
		e.t.Fatalf("first append after recovery at %d, want NextOffset %d", a.Base, next)
	}
	e.checkHolds("log after recovery", e.readAll(st2), append(acks, a))
}

func caseCrashRepeated(e *env) {
	s := e.store()
	e.needCrash(s)
	name := e.name("s")
	var all []acked
	for round := range 4 {
		st := e.open(s, name, uint64(round+1))
		if st.NextOffset() < endOf(all) {
			e.t.Fatalf("round %d: NextOffset %d below the acked end %d", round, st.NextOffset(), endOf(all))
		}
		e.checkHolds(fmt.Sprintf("round %d: log at open", round), e.readAll(st), all)
		n := 1 + e.rng.IntN(e.h.scaled(60))
		futs := make([]*stream.AppendFuture, n)
		bs := make([]stream.Batch, n)
		for i := range n {
			bs[i] = batch(fmt.Sprintf("cr%d", round), i, 8+e.rng.IntN(3000))
			futs[i] = st.Append(e.ctx, bs[i])
		}
		// Keep the acks up to a random point; the rest race the crash.
		k := e.rng.IntN(n)
		if _, err := futs[k].Wait(e.ctx); err != nil {
			e.t.Fatalf("round %d: append %d: %v", round, k, err)
		}
		s = e.crash(s)
		probe := e.open(s, name, uint64(round+1)) // same-epoch reopen fences the crashed session
		outs := e.collect(futs, bs)
		acks, err := checkOldSession(outs, probe.NextOffset(), stream.ErrFenced, stream.ErrUnavailable, stream.ErrClosed)
		if err != nil {
			e.t.Fatalf("round %d: crashed session: %v", round, err)
		}
		all = append(all, acks...)
		if err := probe.Close(); err != nil {
			e.t.Fatalf("round %d: close: %v", round, err)
		}
	}
	st := e.open(s, name, 10)
	log := e.readAll(st)
	if err := contiguous(log); err != nil {
		e.t.Fatalf("final log: %v", err)
	}
	e.checkHolds("final log", log, all)
}

func endOf(acks []acked) int64 {
	if len(acks) == 0 {
		return 0
	}
	a := acks[len(acks)-1]
	return a.Base + int64(a.Batch.Count)
}

func caseCrashKeepsNamespace(e *env) {
	s := e.store()
	e.needCrash(s)
	kept, gone := e.name("kept"), e.name("gone")
	for _, n := range []string{kept, gone} {
		if err := s.Create(e.ctx, n); err != nil {
			e.t.Fatalf("create %q: %v", n, err)
		}
	}
	if err := s.Delete(e.ctx, gone); err != nil {
		e.t.Fatalf("delete %q: %v", gone, err)
	}
	s2 := e.crash(s)
	names, err := s2.List(e.ctx, e.prefix+"/")
	if err != nil {
		e.t.Fatalf("list after crash: %v", err)
	}
	if len(names) != 1 || names[0] != kept {
		e.t.Fatalf("List after crash = %q, want only %q", names, kept)
	}
	_, err = s2.Open(e.ctx, gone, stream.OpenOptions{Epoch: 1})
	e.wantErr("open of a stream deleted before the crash", err, stream.ErrNotFound)
	st := e.open(s2, kept, 1)
	e.wantOffsets("stream created before the crash", st, 0, 0)
}
