package wal

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/stratastream/strata/stream"
)

// The fault-injecting base of the simulation (sim_test.go): a
// stream.Store per simulated process over one shared memory store (the
// truth). Every mutation a process asks of the base — a read-write open,
// create, delete, trim, and every append — is an operation that waits for
// the scheduler, which applies it, answers it, times it out (the
// operation may still land later, or never) or drops it, as the base
// contract of docs/design.md (the Stream contract) allows:
//
//   - appends of one session land in call order: when one lands, every
//     earlier one that has not landed never will;
//   - acks complete in call order; when one append fails, every later
//     in-flight append of the session fails too (even one that landed);
//   - an append that failed may still land, but only before a later-called
//     append of its session lands, and never after its session is fenced
//     (the memory store refuses appends of a superseded session).
//
// Reads (read-only opens, fetches, lists, offsets) go to the memory store
// at once: between two steps nothing mutates it, so what they see is
// fixed by the schedule.

// simOp is one base operation waiting for the scheduler.
type simOp struct {
	seq   uint64
	proc  int
	kind  string // append, open, create, delete, trim
	name  string
	h     *simHandle
	idx   int // call index within the session (appends)
	batch stream.Batch
	oopts stream.OpenOptions
	to    int64

	landed   bool // applied to the memory store
	answered bool
	dead     bool   // will never land
	doomed   bool   // an earlier in-flight append failed: this one fails too
	late     bool   // answered with an error, not landed, may still land
	failedAt uint64 // w.opSeq when answered with an error
	// blockers are the earlier appends that failed, not landed, while this
	// one was in flight: at the offsets call order gave it, it lands only
	// after them.
	blockers []*simOp
	res      stream.AppendResult
	err      error
	complete func(stream.AppendResult, error)
	done     chan struct{}
	opened   *simHandle
}

func (o *simOp) String() string {
	short := strings.TrimPrefix(o.name, "_wal/")
	switch o.kind {
	case "append":
		return fmt.Sprintf("p%d append#%d %s(s%d) %s", o.proc, o.idx, short, o.h.sess, simDescribe(o.name, o.batch.Payload))
	case "open":
		return fmt.Sprintf("p%d open %s@%d", o.proc, short, o.oopts.Epoch)
	case "trim":
		return fmt.Sprintf("p%d trim %s(s%d) to %d", o.proc, short, o.h.sess, o.to)
	}
	return fmt.Sprintf("p%d %s %s", o.proc, o.kind, short)
}

// simDescribe names what a base batch holds, for the trace.
func simDescribe(name string, p []byte) string {
	switch {
	case bytes.HasPrefix(p, walMagic[:]):
		es, err := decodeWALBatch(id(p[4:20]), p)
		if err != nil {
			return "WAL batch (" + err.Error() + ")"
		}
		var parts []string
		for _, e := range es {
			parts = append(parts, fmt.Sprintf("%s@%d", simAppendID(e.payload), e.base))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case bytes.HasPrefix(p, metaMagic[:]):
		r, err := decodeRecord(p)
		if err != nil {
			return "record (" + err.Error() + ")"
		}
		kinds := map[byte]string{kindClaim: "claim", kindCompact: "compact", kindPark: "park", kindTrim: "trim", kindClose: "close"}
		w := "-"
		if r.wal != "" {
			w = fmt.Sprintf("%s from %d", strings.TrimPrefix(r.wal, "_wal/"), r.from)
		}
		return fmt.Sprintf("{%s wal %s compacted %d start %d}", kinds[r.kind], w, r.compacted, r.start)
	case bytes.HasPrefix(p, runMagic[:]):
		bs, err := decodeData(id(p[4:20]), name, stream.Batch{BaseOffset: -1, Payload: p}, nil)
		if err != nil {
			return "data (" + err.Error() + ")"
		}
		var parts []string
		for _, b := range bs {
			parts = append(parts, simAppendID(b.Payload))
		}
		return "<" + strings.Join(parts, " ") + ">"
	}
	return fmt.Sprintf("%d bytes", len(p))
}

// simBase is process proc's view of the base store.
type simBase struct {
	w    *simWorld
	proc int
}

func (b simBase) Info() stream.Info { return b.w.mem.Info() }

func (b simBase) Create(ctx context.Context, name string) error {
	return b.w.call(ctx, &simOp{proc: b.proc, kind: "create", name: name})
}

func (b simBase) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	if opts.Mode == stream.ModeReadOnly {
		if err := b.w.goneErr(b.proc); err != nil {
			return nil, err
		}
		st, err := b.w.mem.Open(ctx, name, opts)
		if err != nil {
			return nil, err
		}
		return &simHandle{w: b.w, proc: b.proc, st: st}, nil
	}
	op := &simOp{proc: b.proc, kind: "open", name: name, oopts: opts}
	if err := b.w.call(ctx, op); err != nil {
		return nil, err
	}
	return op.opened, nil
}

func (b simBase) Delete(ctx context.Context, name string) error {
	return b.w.call(ctx, &simOp{proc: b.proc, kind: "delete", name: name})
}

func (b simBase) List(ctx context.Context, prefix string) ([]string, error) {
	if err := b.w.goneErr(b.proc); err != nil {
		return nil, err
	}
	return b.w.mem.List(ctx, prefix)
}

// Close does nothing: the memory store is shared by every process.
func (b simBase) Close() error { return nil }

// simHandle is a session on a base stream.
type simHandle struct {
	w     *simWorld
	proc  int
	st    stream.DriverStream // the memory store's session
	sess  uint64              // read-write session number (0: read-only)
	calls int
}

func (h *simHandle) Name() string       { return h.st.Name() }
func (h *simHandle) Epoch() uint64      { return h.st.Epoch() }
func (h *simHandle) StartOffset() int64 { return h.st.StartOffset() }
func (h *simHandle) NextOffset() int64  { return h.st.NextOffset() }
func (h *simHandle) Close() error       { return h.st.Close() }

func (h *simHandle) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	if err := h.w.goneErr(h.proc); err != nil {
		return nil, err
	}
	return h.st.Fetch(ctx, start, end, maxBytes)
}

func (h *simHandle) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.procGone(h.proc) {
		return stream.FailedAppend(fmt.Errorf("%w: simulated base: process %d is gone", stream.ErrUnavailable, h.proc))
	}
	if h.sess == 0 {
		return h.st.Append(ctx, b)
	}
	f, complete := stream.NewAppendFuture()
	b.Payload, b.Properties = bytes.Clone(b.Payload), maps.Clone(b.Properties)
	op := &simOp{proc: h.proc, kind: "append", name: h.st.Name(), h: h, idx: h.calls, batch: b, complete: complete}
	h.calls++
	w.enqueue(op)
	return f
}

func (h *simHandle) Trim(ctx context.Context, newStart int64) error {
	if h.sess == 0 {
		return h.st.Trim(ctx, newStart)
	}
	return h.w.call(ctx, &simOp{proc: h.proc, kind: "trim", name: h.st.Name(), h: h, to: newStart})
}

// enqueue adds op to the pending operations (w.mu held).
func (w *simWorld) enqueue(op *simOp) {
	w.opSeq++
	op.seq = w.opSeq
	w.ops = append(w.ops, op)
}

func (w *simWorld) procGone(p int) bool { return w.shutdown || w.procs[p].dead }

func (w *simWorld) goneErr(p int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.procGone(p) {
		return fmt.Errorf("%w: simulated base: process %d is gone", stream.ErrUnavailable, p)
	}
	return nil
}

// call runs a non-append operation: it waits for the scheduler or ctx.
func (w *simWorld) call(ctx context.Context, op *simOp) error {
	w.mu.Lock()
	if w.procGone(op.proc) {
		w.mu.Unlock()
		return fmt.Errorf("%w: simulated base: process %d is gone", stream.ErrUnavailable, op.proc)
	}
	op.done = make(chan struct{})
	w.enqueue(op)
	w.mu.Unlock()
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		w.mu.Lock()
		defer w.mu.Unlock()
		if op.answered {
			return op.err
		}
		w.answerSync(op, fmt.Errorf("%w: simulated base: %s: %w", stream.ErrUnavailable, op.name, ctx.Err()), op.kind == "trim" || op.kind == "delete")
		return op.err
	}
}

// apply performs op on the memory store (w.mu held).
func (w *simWorld) apply(op *simOp) {
	ctx := context.Background()
	op.landed = true
	w.mut++
	switch op.kind {
	case "append":
		h := op.h
		// Earlier appends of the session that have not landed never will;
		// if one is still in flight, it fails, and so does this one.
		for _, o := range w.ops {
			if o.h == h && o.kind == "append" && o.idx < op.idx && !o.landed && !o.dead {
				o.dead = true
				if !o.answered {
					op.doomed = true
				}
			}
		}
		r, err := h.st.Append(ctx, op.batch).Result()
		op.res, op.err = r, err
		if err != nil {
			op.landed, op.dead = false, true
		}
	case "open":
		st, err := w.mem.Open(ctx, op.name, op.oopts)
		op.err = err
		if err == nil {
			w.sessSeq++
			op.opened = &simHandle{w: w, proc: op.proc, st: st, sess: w.sessSeq}
		}
	case "create":
		op.err = w.mem.Create(ctx, op.name)
	case "delete":
		op.err = w.mem.Delete(ctx, op.name)
	case "trim":
		op.err = op.h.st.Trim(ctx, op.to)
	}
}

// answerSync answers a non-append operation with err (nil: its own
// result), leaving it to land later if late (w.mu held).
func (w *simWorld) answerSync(op *simOp, err error, late bool) {
	op.answered = true
	if err != nil {
		op.err = err
		if !op.landed {
			op.late = late
			op.dead = !late
		}
	}
	close(op.done)
}

// answerAppend completes the first unanswered append of a session (w.mu
// held): acked if it landed and nothing failed before it, else failed
// with err (or its own landing error), failing every later in-flight
// append of the session too.
func (w *simWorld) answerAppend(op *simOp, err error, late bool) {
	op.answered = true
	if err == nil && op.landed && !op.doomed {
		op.complete(op.res, nil)
		return
	}
	if err == nil {
		err = op.err
	}
	if err == nil {
		err = fmt.Errorf("%w: simulated base: an earlier append of the session failed", stream.ErrUnavailable)
	}
	if !op.landed && !op.dead {
		op.late = late
		op.dead = !late
	}
	op.failedAt = w.opSeq
	for _, o := range w.ops {
		if o.h == op.h && o.kind == "append" && o.idx > op.idx && !o.answered {
			o.doomed = true
			if !op.landed {
				o.blockers = append(o.blockers, op)
			}
		}
	}
	op.complete(stream.AppendResult{}, err)
}

// forget drops operations nothing more can happen to (w.mu held).
func (w *simWorld) forget() {
	w.ops = slices.DeleteFunc(w.ops, func(o *simOp) bool {
		return o.answered && (o.landed || o.dead)
	})
}

// firstUnanswered says op is its session's first unanswered append.
func (w *simWorld) firstUnanswered(op *simOp) bool {
	for _, o := range w.ops {
		if o.h == op.h && o.kind == "append" && o.idx < op.idx && !o.answered {
			return false
		}
	}
	return true
}

// kindOrder sorts operations deterministically whatever the order in
// which goroutines issued them.
var kindOrder = map[string]int{"append": 0, "open": 1, "create": 2, "trim": 3, "delete": 4}

func (w *simWorld) sortedOps() []*simOp {
	ops := slices.Clone(w.ops)
	slices.SortStableFunc(ops, func(a, b *simOp) int {
		if a.proc != b.proc {
			return a.proc - b.proc
		}
		if a.kind != b.kind {
			return kindOrder[a.kind] - kindOrder[b.kind]
		}
		if a.name != b.name {
			return strings.Compare(a.name, b.name)
		}
		var as, bs uint64
		if a.h != nil {
			as = a.h.sess
		}
		if b.h != nil {
			bs = b.h.sess
		}
		if as != bs {
			return int(as) - int(bs)
		}
		if a.idx != b.idx {
			return a.idx - b.idx
		}
		if a.oopts.Epoch != b.oopts.Epoch {
			return int(a.oopts.Epoch) - int(b.oopts.Epoch)
		}
		if a.to != b.to {
			return int(a.to - b.to)
		}
		return int(a.seq) - int(b.seq)
	})
	return ops
}

// ---- quiescence ----

var (
	simStackBuf = make([]byte, 1<<20)
	simDumps    int // quiescence checks, for tuning
	simSleeps   int
)

// quiesce returns once every goroutine but the caller is blocked (on a
// channel, a mutex, a condition, a sleep): nothing more happens until the
// scheduler acts. The wal layer holds mutexes across base calls, which
// testing/synctest does not count as durably blocked, so the simulation
// reads the goroutines' states instead; it uses no timers (Linger off,
// compaction and sweeps only on request), so the state it finds is fixed
// by the schedule.
//
// A goroutine in a sleep is polling (writer.close waits for a free flush
// slot so): it is given time to look once more at what the step changed.
func quiesce() {
	slept := false
	for i := 0; ; i++ {
		// With one P, yielding lets the runnable goroutines run; the
		// dump (which stops the world) only confirms.
		for range 8 {
			runtime.Gosched()
		}
		n := runtime.Stack(simStackBuf, true)
		for n == len(simStackBuf) {
			simStackBuf = make([]byte, 2*len(simStackBuf))
			n = runtime.Stack(simStackBuf, true)
		}
		simDumps++
		if allBlocked(simStackBuf[:n]) {
			if slept || !bytes.Contains(simStackBuf[:n], []byte(" [sleep")) {
				return
			}
			slept = true
			simSleeps++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if i > 20 {
			time.Sleep(time.Duration(min(i, 200)) * time.Microsecond)
		}
	}
}

// allBlocked says no goroutine in the dump but the first (the caller) is
// running or runnable.
func allBlocked(dump []byte) bool {
	first := true
	for len(dump) > 0 {
		line := dump
		if i := bytes.IndexByte(dump, '\n'); i >= 0 {
			line, dump = dump[:i], dump[i+1:]
		} else {
			dump = nil
		}
		if !bytes.HasPrefix(line, []byte("goroutine ")) {
			continue
		}
		if first {
			first = false
			continue
		}
		i := bytes.IndexByte(line, '[')
		if i < 0 {
			continue
		}
		state := line[i+1:]
		for _, active := range [][]byte{[]byte("running"), []byte("runnable"), []byte("syscall"), []byte("preempted")} {
			if bytes.HasPrefix(state, active) {
				return false
			}
		}
	}
	return true
}
