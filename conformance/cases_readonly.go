package conformance

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyReadOnly,
	Case{Name: "sees-acked", Doc: "read-only readers in a second store, opened before and after the appends, see every acked batch", run: caseROSeesAcked},
	Case{Name: "read-after-ack", Doc: "a reader in a second store racing a writer sees everything acked before each fetch began", Randomised: true, run: caseROReadAfterAck},
	Case{Name: "does-not-fence", Doc: "read-only opens never fence the writer; they report epoch 0", run: caseRODoesNotFence},
	Case{Name: "refuses-writes", Doc: "a read-only session's appends and trims fail with ErrInvalidArgument and change nothing", run: caseRORefusesWrites},
	Case{Name: "sees-trim", Doc: "a reader opened after an acked trim starts at or above the trimmed offset", run: caseROSeesTrim},
)

func caseROSeesAcked(e *env) {
	_, s2, name, w := e.readerSetup()
	early := e.openRO(s2, name)
	e.wantOffsets("reader of an empty stream", early, 0, 0)
	acks := e.appendMany(w, "rosa", 50, 300)
	late := e.openRO(s2, name)
	for what, r := range map[string]*stream.Stream{"reader opened before the appends": early, "reader opened after the appends": late} {
		log := e.readAll(r)
		if len(log) != len(acks) {
			e.t.Fatalf("%s read %d batches, %d were acked", what, len(log), len(acks))
		}
		e.checkHolds(what, log, acks)
		if r.NextOffset() != endOf(acks) {
			e.t.Fatalf("%s: NextOffset %d after reading, want %d", what, r.NextOffset(), endOf(acks))
		}
	}
}

func caseROReadAfterAck(e *env) {
	_, s2, name, w := e.readerSetup()
	r := e.openRO(s2, name)
	n := e.h.scaled(300)
	var (
		ackedEnd atomic.Int64
		mu       sync.Mutex
		acks     []acked
		werr     error
		done     = make(chan struct{})
	)
	window := 1 + e.rng.IntN(16)
	go func() {
		defer close(done)
		futs := make([]*stream.AppendFuture, n)
		bs := make([]stream.Batch, n)
		ack := func(j int) bool {
			res, err := futs[j].Wait(e.ctx)
			if err != nil {
				werr = fmt.Errorf("append %d: %w", j, err)
				return false
			}
			mu.Lock()
			acks = append(acks, acked{Base: res.BaseOffset, Batch: bs[j]})
			mu.Unlock()
			ackedEnd.Store(res.NextOffset)
			return true
		}
		for i := range n {
			bs[i] = batch("raa", i, 16+(i*37)%3000)
			futs[i] = w.Append(e.ctx, bs[i])
			if i >= window && !ack(i-window) {
				return
			}
		}
		for j := max(0, n-window); j < n; j++ {
			if !ack(j) {
				return
			}
		}
	}()
	reads := 0
	var log []stream.Batch
	for finished := false; !finished; reads++ {
		select {
		case <-done:
			finished = true
		default:
		}
		before := ackedEnd.Load()
		from := endOfLog(log)
		more, err := readFrom(e.ctx, r, from, 1+e.rng.IntN(20000))
		if err != nil {
			e.t.Fatalf("reader: %v", err)
		}
		log = append(log, more...)
		if got := endOfLog(log); got < before {
			e.t.Fatalf("reader's fetch reached offset %d, but %d was acked before it began (read-after-ack)", got, before)
		}
	}
	if werr != nil {
		e.t.Fatalf("writer: %v", werr)
	}
	if err := contiguous(log); err != nil {
		e.t.Fatalf("reader's log: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	e.checkHolds("reader's log", log, acks)
	e.t.Logf("%d reads while %d appends were acked", reads, n)
}

func endOfLog(log []stream.Batch) int64 {
	if len(log) == 0 {
		return 0
	}
	return log[len(log)-1].EndOffset()
}

func caseRODoesNotFence(e *env) {
	s1, s2, name, w := e.readerSetup()
	acks := e.appendMany(w, "rdnf", 5, 100)
	for i, s := range []*stream.Store{s2, s1, s2} {
		r := e.openRO(s, name)
		if r.Epoch() != 0 {
			e.t.Fatalf("read-only session reports epoch %d, want 0", r.Epoch())
		}
		acks = append(acks, e.appendOK(w, batch("rdnf-after", i, 100)))
		e.checkHolds("reader", e.readAll(r), acks)
	}
	if err := w.Trim(e.ctx, 1); err != nil {
		e.t.Fatalf("writer's trim after read-only opens: %v", err)
	}
}

func caseRORefusesWrites(e *env) {
	_, s2, name, w := e.readerSetup()
	acks := e.appendMany(w, "rorw", 5, 100)
	r := e.openRO(s2, name)
	_, err := stream.Append(e.ctx, r, batch("rorw-ro", 0, 10))
	e.wantErr("append by a read-only session", err, stream.ErrInvalidArgument)
	if err := r.Trim(e.ctx, 2); !errors.Is(err, stream.ErrInvalidArgument) {
		e.t.Fatalf("trim by a read-only session: %v, want %v", err, stream.ErrInvalidArgument)
	}
	e.wantOffsets("writer after refused read-only writes", w, 0, endOf(acks))
	a := e.appendOK(w, batch("rorw", 9, 10))
	log := e.readAll(w)
	if len(log) != len(acks)+1 {
		e.t.Fatalf("log holds %d batches, want %d", len(log), len(acks)+1)
	}
	e.checkHolds("log", log, append(acks, a))
}

func caseROSeesTrim(e *env) {
	_, s2, name, w := e.readerSetup()
	acks := e.appendMany(w, "rost", 20, 100)
	to := acks[7].Base
	if err := w.Trim(e.ctx, to); err != nil {
		e.t.Fatalf("Trim(%d): %v", to, err)
	}
	r := e.openRO(s2, name)
	if r.StartOffset() < to {
		// A reader may learn the start lazily, but its fetch must not serve trimmed offsets.
		if _, err := r.Fetch(e.ctx, to-1, stream.NoEnd, 0); err == nil {
			e.t.Fatalf("reader opened after Trim(%d) fetched offset %d", to, to-1)
		}
	}
	e.checkHolds("reader after trim", e.readAll(r), acks[7:])
}
