package conformance

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyFencing,
	Case{Name: "higher-fences-lower", Doc: "an open at a higher epoch in a second store fences the first: its appends and trims fail ErrFenced; its acks are kept", run: caseHigherFencesLower},
	Case{Name: "lower-refused", Doc: "an open below the stored epoch fails ErrFenced from either store and disturbs nobody", run: caseLowerRefused},
	Case{Name: "same-epoch-reopen", Doc: "a same-epoch open in a second store supersedes the first session", run: caseSameEpochReopen},
	Case{Name: "same-epoch-reopen-same-store", Doc: "a same-epoch reopen on the same store supersedes the old session (owner recovery)", run: caseSameEpochSameStore},
	Case{Name: "stale-writer-inflight", Doc: "100 appends in flight while a new owner opens: acks only below its NextOffset, the rest ErrFenced, no loss, no divergence, readers agree", Randomised: true, run: caseStaleWriterInflight},
	Case{Name: "fenced-trim-refused", Doc: "a fenced session's trim fails ErrFenced and moves no start offset", run: caseFencedTrimRefused},
	Case{Name: "trim-races-fence", Doc: "a trim racing a new owner's open either lands before the fence (and the new owner sees it) or fails ErrFenced", Randomised: true, run: caseTrimRacesFence},
	Case{Name: "ping-pong-owners", Doc: "two stores take the stream over from each other with rising epochs while both write: one log, every ack once", Randomised: true, run: casePingPong},
)

func caseHigherFencesLower(e *env) {
	old, cur, _, acks := e.takeover("hfl", 20, 1, 2)
	if cur.NextOffset() != endOf(acks) {
		e.t.Fatalf("new owner opened at NextOffset %d, the old session acked up to %d", cur.NextOffset(), endOf(acks))
	}
	_, err := stream.Append(e.ctx, old, batch("hfl-stale", 0, 10))
	e.wantErr("append by the fenced session", err, stream.ErrFenced)
	e.wantErr("trim by the fenced session", old.Trim(e.ctx, 1), stream.ErrFenced)
	e.wantOffsets("new owner after stale attempts", cur, 0, endOf(acks))
	a := e.appendOK(cur, batch("hfl-new", 0, 10))
	if a.Base != endOf(acks) {
		e.t.Fatalf("new owner's first append at %d, want %d", a.Base, endOf(acks))
	}
	log := e.readAll(cur)
	e.checkHolds("new owner's log", log, append(acks, a))
	if len(log) != len(acks)+1 {
		e.t.Fatalf("log holds %d batches, want %d (a stale append landed?)", len(log), len(acks)+1)
	}
}

func caseLowerRefused(e *env) {
	s1 := e.store()
	e.needSecond()
	s2 := e.second(s1)
	name := e.name("s")
	first := e.open(s1, name, 3)
	acks := e.appendMany(first, "lr", 5, 50)
	cur := e.open(s2, name, 10)
	for _, tc := range []struct {
		s     *stream.Store
		epoch uint64
	}{{s1, 9}, {s2, 9}, {s1, 3}, {s2, 1}, {s1, 0}} {
		_, err := tc.s.Open(e.ctx, name, stream.OpenOptions{Epoch: tc.epoch})
		e.wantErr(fmt.Sprintf("open at epoch %d below the stored 10", tc.epoch), err, stream.ErrFenced)
	}
	// The refused opens fenced nobody: the epoch-10 session still writes.
	a := e.appendOK(cur, batch("lr", 99, 50))
	e.checkHolds("log", e.readAll(cur), append(acks, a))
	// And the epoch stays 10: a same-epoch open elsewhere succeeds.
	again := e.open(s1, name, 10)
	_, err := stream.Append(e.ctx, cur, batch("lr", 100, 50))
	e.wantErr("append by the session superseded by a same-epoch open", err, stream.ErrFenced)
	e.wantOffsets("same-epoch reopen", again, 0, a.Base+int64(a.Batch.Count))
}

func caseSameEpochReopen(e *env) {
	old, cur, _, acks := e.takeover("ser", 10, 4, 4)
	_, err := stream.Append(e.ctx, old, batch("ser-stale", 0, 10))
	e.wantErr("append by the session a same-epoch open superseded", err, stream.ErrFenced)
	e.wantErr("trim by the superseded session", old.Trim(e.ctx, 1), stream.ErrFenced)
	a := e.appendOK(cur, batch("ser-new", 0, 10))
	e.checkHolds("log", e.readAll(cur), append(acks, a))
}

func caseSameEpochSameStore(e *env) {
	s := e.store()
	name := e.name("s")
	old := e.open(s, name, 2)
	acks := e.appendMany(old, "sess", 10, 100)
	cur := e.open(s, name, 2)
	_, err := stream.Append(e.ctx, old, batch("sess-stale", 0, 10))
	e.wantErr("append by the superseded session on the same store", err, stream.ErrFenced)
	a := e.appendOK(cur, batch("sess-new", 0, 10))
	e.checkHolds("log", e.readAll(cur), append(acks, a))
}

// opened is the result of an open run in its own goroutine.
type opened struct {
	st  *stream.Stream
	err error
}

func caseStaleWriterInflight(e *env) {
	s1 := e.store()
	e.needSecond()
	s2 := e.second(s1)
	stores := []*stream.Store{s1, s2}
	name := e.name("s")
	var all []acked
	owner := e.open(s1, name, 1)
	const inflight = 100
	for round := range 3 {
		// Some acked history first.
		all = append(all, e.appendMany(owner, fmt.Sprintf("sw%d-pre", round), 5, 200)...)
		// 100 appends in flight; the new owner opens after a random number of them.
		openAt := e.rng.IntN(inflight)
		futs := make([]*stream.AppendFuture, inflight)
		bs := make([]stream.Batch, inflight)
		res := make(chan opened, 1)
		next := stores[(round+1)%2]
		epoch := uint64(round + 2)
		for i := range inflight {
			if i == openAt {
				go func() {
					st, err := next.Open(e.ctx, name, stream.OpenOptions{Epoch: epoch})
					res <- opened{st, err}
				}()
			}
			bs[i] = batch(fmt.Sprintf("sw%d", round), i, 64+e.rng.IntN(2000))
			futs[i] = owner.Append(e.ctx, bs[i])
			if e.rng.IntN(8) == 0 {
				runtime.Gosched()
			}
		}
		o := <-res
		if o.err != nil {
			e.t.Fatalf("round %d: new owner's open at epoch %d: %v", round, epoch, o.err)
		}
		e.closeStreamLater(o.st)
		newNext := o.st.NextOffset()
		outs := e.collect(futs, bs)
		acks, err := checkOldSession(outs, newNext, stream.ErrFenced)
		if err != nil {
			e.t.Fatalf("round %d (open after %d appends): %v", round, openAt, err)
		}
		e.t.Logf("round %d: new owner opened after %d appends were issued, at offset %d; %d of %d in-flight appends acked", round, openAt, newNext, len(acks), inflight)
		all = append(all, acks...)
		log := e.readAll(o.st)
		if err := contiguous(log); err != nil {
			e.t.Fatalf("round %d: new owner's log: %v", round, err)
		}
		if len(log) > 0 && log[len(log)-1].EndOffset() != newNext {
			e.t.Fatalf("round %d: new owner's log ends at %d, its NextOffset is %d", round, log[len(log)-1].EndOffset(), newNext)
		}
		e.checkHolds(fmt.Sprintf("round %d: new owner's log", round), log, all)
		// The stale session can do nothing more.
		_, err = stream.Append(e.ctx, owner, batch("stale", round, 10))
		e.wantErr("append by the stale session after the race", err, stream.ErrFenced)
		owner = o.st
	}
	// Every reader agrees: the owner and read-only readers in both stores.
	ref := e.readAll(owner)
	if s1.Info().ReadOnlyOpen {
		for i, s := range stores {
			if err := sameLog(e.readAll(e.openRO(s, name)), ref); err != nil {
				e.t.Fatalf("reader in store %d disagrees with the owner: %v", i+1, err)
			}
		}
	}
	e.checkHolds("final log", ref, all)
}

func caseFencedTrimRefused(e *env) {
	old, cur, s2, acks := e.takeover("ftr", 20, 1, 2)
	for _, to := range []int64{1, acks[10].Base, endOf(acks)} {
		e.wantErr(fmt.Sprintf("Trim(%d) by the fenced session", to), old.Trim(e.ctx, to), stream.ErrFenced)
	}
	e.wantOffsets("new owner after stale trims", cur, 0, endOf(acks))
	check := e.open(s2, cur.Name(), 3)
	e.wantOffsets("fresh open after stale trims", check, 0, endOf(acks))
	e.checkHolds("log after stale trims", e.readAll(check), acks)
}

func caseTrimRacesFence(e *env) {
	s1 := e.store()
	e.needSecond()
	s2 := e.second(s1)
	stores := []*stream.Store{s1, s2}
	name := e.name("s")
	owner := e.open(s1, name, 1)
	var all []acked
	for round := range 6 {
		all = append(all, e.appendMany(owner, fmt.Sprintf("trf%d", round), 10, 100)...)
		trimTo := owner.StartOffset() + 1 + e.rng.Int64N(owner.NextOffset()-owner.StartOffset())
		next := stores[(round+1)%2]
		var (
			wg      sync.WaitGroup
			trimErr error
			o       opened
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			trimErr = owner.Trim(e.ctx, trimTo)
		}()
		go func() {
			defer wg.Done()
			if e.rng.IntN(2) == 0 {
				runtime.Gosched()
			}
			o.st, o.err = next.Open(e.ctx, name, stream.OpenOptions{Epoch: uint64(round + 2)})
		}()
		wg.Wait()
		if o.err != nil {
			e.t.Fatalf("round %d: open at epoch %d: %v", round, round+2, o.err)
		}
		e.closeStreamLater(o.st)
		switch {
		case trimErr == nil:
			if o.st.StartOffset() < trimTo {
				e.t.Fatalf("round %d: Trim(%d) by the old owner succeeded but the new owner opened with start %d (a trim acked after the fence)", round, trimTo, o.st.StartOffset())
			}
		case errors.Is(trimErr, stream.ErrFenced):
		default:
			e.t.Fatalf("round %d: Trim(%d) racing a fence: %v, want nil or ErrFenced", round, trimTo, trimErr)
		}
		e.wantErr("trim by the old owner after the race", owner.Trim(e.ctx, o.st.NextOffset()), stream.ErrFenced)
		owner = o.st
		log := e.readAll(owner)
		var live []acked
		for _, a := range all {
			if a.Base+int64(a.Batch.Count) > owner.StartOffset() {
				live = append(live, a)
			}
		}
		e.checkHolds(fmt.Sprintf("round %d: log after the race", round), log, live)
		e.t.Logf("round %d: Trim(%d) -> %v; new owner start %d next %d", round, trimTo, trimErr, owner.StartOffset(), owner.NextOffset())
	}
}

func casePingPong(e *env) {
	s1 := e.store()
	e.needSecond()
	s2 := e.second(s1)
	stores := []*stream.Store{s1, s2}
	name := e.name("s")
	type session struct {
		st     *stream.Stream
		outs   []outcome
		stop   chan struct{} // closed once a newer session opened
		done   chan struct{}
		issued atomic.Int64
	}
	// write appends in a window of 8 until the session is fenced or stop.
	write := func(ss *session, tag string) {
		defer close(ss.done)
		var futs []*stream.AppendFuture
		var bs []stream.Batch
		defer func() {
			for i, f := range futs {
				r, err := f.Result()
				ss.outs = append(ss.outs, outcome{Batch: bs[i], Res: r, Err: err})
			}
		}()
		for i := 0; ; i++ {
			select {
			case <-ss.stop:
				return
			default:
			}
			if len(futs) >= 8 {
				if _, err := futs[len(futs)-8].Result(); err != nil {
					return
				}
			}
			b := batch(tag, i, 32+i%500)
			futs = append(futs, ss.st.Append(e.ctx, b))
			bs = append(bs, b)
			ss.issued.Add(1)
		}
	}
	var all []acked
	var prev *session
	rounds := e.h.scaled(8)
	stopPrev := func() {
		if prev != nil {
			// Let the old writer go on into the fence: it stops by itself
			// once an append fails, or after 8 more appends.
			from := prev.issued.Load()
			deadline := time.Now().Add(10 * time.Second)
			for prev.issued.Load() < from+8 && time.Now().Before(deadline) {
				select {
				case <-prev.done:
					deadline = time.Time{}
				case <-time.After(time.Millisecond):
				}
			}
			close(prev.stop)
			<-prev.done
		}
	}
	for round := range rounds {
		st, err := stores[round%2].Open(e.ctx, name, stream.OpenOptions{Epoch: uint64(round + 1), CreateIfMissing: true})
		if err != nil {
			stopPrev()
			e.t.Fatalf("round %d: open at epoch %d: %v", round, round+1, err)
		}
		e.closeStreamLater(st)
		newNext := st.NextOffset()
		if prev != nil {
			stopPrev()
			acks, err := checkOldSession(prev.outs, newNext, stream.ErrFenced)
			if err != nil {
				e.t.Fatalf("round %d: session of epoch %d: %v", round, round, err)
			}
			all = append(all, acks...)
		}
		cur := &session{st: st, stop: make(chan struct{}), done: make(chan struct{})}
		go write(cur, fmt.Sprintf("pp%d", round))
		// Let it write a little before the next takeover.
		for range 1 + e.rng.IntN(3) {
			if _, err := st.Fetch(e.ctx, st.StartOffset(), stream.NoEnd, 1); err != nil && !errors.Is(err, stream.ErrFenced) {
				close(cur.stop)
				<-cur.done
				e.t.Fatalf("round %d: fetch: %v", round, err)
			}
		}
		prev = cur
	}
	stopPrev()
	for _, o := range prev.outs {
		if o.Err != nil {
			e.t.Fatalf("last owner's append failed: %v", o.Err)
		}
		all = append(all, acked{Base: o.Res.BaseOffset, Batch: o.Batch})
	}
	final := e.open(stores[rounds%2], name, uint64(rounds+1))
	log := e.readAll(final)
	if err := contiguous(log); err != nil {
		e.t.Fatalf("final log: %v", err)
	}
	e.checkHolds("final log", log, all)
	e.t.Logf("%d sessions, %d acked appends, final log %d batches", rounds, len(all), len(log))
}
