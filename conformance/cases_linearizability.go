package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyLinearizability,
	Case{Name: "single-session", Doc: "concurrent appends, fetches and trims by several clients on one session form a linearizable log history (porcupine)", Randomised: true, run: caseLinSingleSession},
	Case{Name: "cross-store-readers", Doc: "appends on one store and fetches by read-only readers on a second store form a linearizable history (porcupine)", Randomised: true, run: caseLinCrossStore},
	Case{Name: "takeovers", Doc: "writers racing repeated takeovers between two stores, with readers on both: acks only from the current session, fenced appends land only before their fence (porcupine)", Randomised: true, run: caseLinTakeovers},
)

// The log model. The state is the current writer session, the start and
// next offsets, and the batches (base, count, id) appended so far; a
// batch's id is its Timestamp. An open makes its session current (and
// reports the log's end and start). An acked append or a successful trim
// must come from the current session. An append or trim that failed
// ErrFenced may or may not have taken effect, but only while its session
// was current: the model branches (a nondeterministic model). Single-session
// histories use session 0, current from the start.
//
// Branching on every fenced append makes the model's state set grow as
// 2^k between two observations, and porcupine can only time out between
// steps, so a history with dozens of fenced appends could hang the check.
// Histories with takeovers therefore end with a read of the whole log by a
// new session (resolveFenced); a fenced append whose batch that read finds
// is then known to have landed, at the offset found, and one it does not
// find is known not to have: the model no longer branches on it. That read
// is itself in the history, so a wrong "landed" claim cannot slip through.

type linKind byte

const (
	linAppend linKind = 'a'
	linFetch  linKind = 'f'
	linTrim   linKind = 't'
	linOpen   linKind = 'o'
)

type linInput struct {
	Kind     linKind
	Session  int    // append, trim, open: the writer session
	ID       int64  // append: the batch's id
	Count    uint32 // append
	Offset   int64  // fetch: start; trim: new start
	MaxBytes int    // fetch
}

type linBatch struct {
	Base int64
	ID   int64
}

type linOutput struct {
	Base   int64      // append; for a fenced append, where it landed
	Range  bool       // ErrOffsetOutOfRange
	Fenced bool       // ErrFenced
	Got    []linBatch // fetch
	Start  int64      // open: StartOffset
	Next   int64      // open: NextOffset
	// Resolved marks a fenced append whose fate the final read settled;
	// Landed says which way.
	Resolved, Landed bool
}

type linState struct {
	cur         int
	start, next int64
	batches     []linBatch // append order; base offsets increasing
	counts      []uint32
}

func (s linState) withAppend(in linInput) linState {
	n := linState{cur: s.cur, start: s.start, next: s.next + int64(in.Count)}
	n.batches = append(append(make([]linBatch, 0, len(s.batches)+1), s.batches...), linBatch{Base: s.next, ID: in.ID})
	n.counts = append(append(make([]uint32, 0, len(s.counts)+1), s.counts...), in.Count)
	return n
}

// linStep returns the states s can move to by the operation, none if the
// operation's output is impossible in s.
func linStep(s linState, in linInput, out linOutput) []any {
	switch in.Kind {
	case linOpen:
		if out.Next != s.next || out.Start != s.start {
			return nil
		}
		n := s
		n.cur = in.Session
		return []any{n}
	case linAppend:
		if out.Fenced && out.Resolved && !out.Landed {
			return []any{s}
		}
		if out.Fenced && !out.Resolved {
			if in.Session == s.cur {
				return []any{s, s.withAppend(in)}
			}
			return []any{s}
		}
		if in.Session != s.cur || out.Base != s.next {
			return nil
		}
		return []any{s.withAppend(in)}
	case linTrim:
		trimmed := s
		trimmed.start = max(s.start, in.Offset)
		switch {
		case out.Range:
			if in.Offset > s.next {
				return []any{s}
			}
			return nil
		case out.Fenced:
			if in.Session == s.cur && in.Offset <= s.next {
				return []any{s, trimmed}
			}
			return []any{s}
		case in.Session != s.cur || in.Offset > s.next:
			return nil
		}
		return []any{trimmed}
	case linFetch:
		if in.Offset < s.start || in.Offset > s.next {
			if out.Range {
				return []any{s}
			}
			return nil
		}
		if out.Range {
			return nil
		}
		if in.Offset == s.next {
			if len(out.Got) == 0 {
				return []any{s}
			}
			return nil
		}
		i := sort.Search(len(s.batches), func(i int) bool {
			return s.batches[i].Base+int64(s.counts[i]) > in.Offset
		})
		if len(out.Got) == 0 || len(out.Got) > len(s.batches)-i {
			return nil
		}
		for j, g := range out.Got {
			if g != s.batches[i+j] {
				return nil
			}
		}
		return []any{s}
	}
	return nil
}

var linModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{}} },
	Step: func(state, input, output any) []any {
		return linStep(state.(linState), input.(linInput), output.(linOutput))
	},
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		if x.cur != y.cur || x.start != y.start || x.next != y.next || len(x.batches) != len(y.batches) {
			return false
		}
		for i := range x.batches {
			if x.batches[i] != y.batches[i] {
				return false
			}
		}
		return true
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.Kind {
		case linAppend:
			return fmt.Sprintf("s%d append(id %d, count %d) -> base %d fenced=%v landed=%v", in.Session, in.ID, in.Count, out.Base, out.Fenced, out.Landed)
		case linTrim:
			return fmt.Sprintf("s%d trim(%d) -> range=%v fenced=%v", in.Session, in.Offset, out.Range, out.Fenced)
		case linOpen:
			return fmt.Sprintf("open s%d -> [%d, %d)", in.Session, out.Start, out.Next)
		}
		return fmt.Sprintf("fetch(%d, max %d) -> range=%v %v", in.Offset, in.MaxBytes, out.Range, out.Got)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("s%d [%d, %d) %d batches", s.cur, s.start, s.next, len(s.batches))
	},
}).ToModel()

// linRecorder collects a history and the payload of every id.
type linRecorder struct {
	ctx      context.Context
	t0       time.Time
	mu       sync.Mutex
	ops      []porcupine.Operation
	payloads map[int64][]byte
	errs     []string
}

func newLinRecorder(ctx context.Context) *linRecorder {
	return &linRecorder{ctx: ctx, t0: time.Now(), payloads: map[int64][]byte{}}
}

func (r *linRecorder) now() int64 { return int64(time.Since(r.t0)) }

func (r *linRecorder) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *linRecorder) add(client int, in linInput, call int64, out linOutput) {
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

func (r *linRecorder) append(client int, st *stream.Stream, session int, id int64, size int) {
	b := stream.Batch{Count: uint32(1 + id%4), Timestamp: id, Payload: payload("lin", int(id), size)}
	r.mu.Lock()
	r.payloads[id] = b.Payload
	r.mu.Unlock()
	in := linInput{Kind: linAppend, Session: session, ID: id, Count: b.Count}
	call := r.now()
	res, err := stream.Append(r.ctx, st, b)
	var out linOutput
	switch {
	case errors.Is(err, stream.ErrFenced):
		out.Fenced = true
	case err != nil:
		r.fail("client %d: append id %d: %v", client, id, err)
		return
	default:
		out.Base = res.BaseOffset
	}
	r.add(client, in, call, out)
}

// fetch records a fetch and returns its batches (nil after an unexpected
// error, which fails the case at check).
func (r *linRecorder) fetch(client int, st *stream.Stream, start int64, maxBytes int) []stream.Batch {
	in := linInput{Kind: linFetch, Offset: start, MaxBytes: maxBytes}
	call := r.now()
	bs, err := st.Fetch(r.ctx, start, stream.NoEnd, maxBytes)
	var out linOutput
	switch {
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		out.Range = true
	case err != nil:
		r.fail("client %d: fetch from %d: %v", client, start, err)
		return nil
	}
	for _, b := range bs {
		out.Got = append(out.Got, linBatch{Base: b.BaseOffset, ID: b.Timestamp})
	}
	r.add(client, in, call, out)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range bs {
		want, ok := r.payloads[b.Timestamp]
		if !ok {
			r.errs = append(r.errs, fmt.Sprintf("client %d: fetch returned a batch (timestamp %d) nobody appended yet", client, b.Timestamp))
		} else if err := sameBatch(b, stream.Batch{Count: uint32(1 + b.Timestamp%4), Timestamp: b.Timestamp, Payload: want}); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("client %d: batch at %d: %v", client, b.BaseOffset, err))
		}
	}
	return bs
}

// resolveFenced reads the whole log through st (a session opened after
// every other operation returned), recording the reads, and marks each
// fenced append as landed at the offset the read found it, or as not
// landed. The contract makes every reader agree on the log, so this read
// is the fate of every unacked append.
func (r *linRecorder) resolveFenced(st *stream.Stream) {
	where := map[int64]int64{}
	for off, next := st.StartOffset(), st.NextOffset(); off < next; {
		bs := r.fetch(98, st, off, 1<<20)
		if len(bs) == 0 {
			r.fail("final read: fetch from %d below next offset %d returned nothing", off, next)
			return
		}
		for _, b := range bs {
			where[b.Timestamp] = b.BaseOffset
		}
		last := bs[len(bs)-1]
		off = last.BaseOffset + int64(last.Count)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, op := range r.ops {
		out := op.Output.(linOutput)
		in := op.Input.(linInput)
		if in.Kind != linAppend || !out.Fenced {
			continue
		}
		out.Resolved = true
		out.Base, out.Landed = where[in.ID]
		r.ops[i].Output = out
	}
}

func (r *linRecorder) trim(client int, st *stream.Stream, session int, to int64) {
	in := linInput{Kind: linTrim, Session: session, Offset: to}
	call := r.now()
	err := st.Trim(r.ctx, to)
	var out linOutput
	switch {
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		out.Range = true
	case errors.Is(err, stream.ErrFenced):
		out.Fenced = true
	case err != nil:
		r.fail("client %d: trim to %d: %v", client, to, err)
		return
	}
	r.add(client, in, call, out)
}

// open opens name read-write on s at epoch as writer session session.
func (r *linRecorder) open(client int, s *stream.Store, name string, epoch uint64, session int) (*stream.Stream, error) {
	call := r.now()
	st, err := s.Open(r.ctx, name, stream.OpenOptions{Epoch: epoch})
	if err != nil {
		return nil, err
	}
	r.add(client, linInput{Kind: linOpen, Session: session}, call, linOutput{Start: st.StartOffset(), Next: st.NextOffset()})
	return st, nil
}

// check runs porcupine over the history; on a violation it writes a
// visualisation next to the temp dir and fails the case.
func (r *linRecorder) check(e *env) {
	e.t.Helper()
	if len(r.errs) > 0 {
		e.t.Fatalf("%d operations failed; first: %s", len(r.errs), r.errs[0])
	}
	res, info := porcupine.CheckOperationsVerbose(linModel, r.ops, 2*time.Minute)
	switch res {
	case porcupine.Ok:
		e.t.Logf("history of %d operations is linearizable", len(r.ops))
	case porcupine.Unknown:
		e.t.Logf("porcupine timed out on a history of %d operations: inconclusive", len(r.ops))
	default:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("strata-linearizability-%d.html", e.seed))
		if err := porcupine.VisualizePath(linModel, info, path); err != nil {
			path = "(visualisation failed: " + err.Error() + ")"
		}
		e.t.Fatalf("history of %d operations is not linearizable; visualisation: %s", len(r.ops), path)
	}
}

func caseLinSingleSession(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	rec := newLinRecorder(e.ctx)
	per := e.h.scaled(60)
	var wg sync.WaitGroup
	var nextID sync.Mutex
	id := int64(0)
	newID := func() int64 {
		nextID.Lock()
		defer nextID.Unlock()
		id++
		return id
	}
	seeds := make([]uint64, 5)
	for i := range seeds {
		seeds[i] = e.rng.Uint64()
	}
	for c := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(seeds[c])
			for range per {
				switch {
				case c < 2: // appenders
					rec.append(c, st, 0, newID(), 8+rng.IntN(600))
				case c < 4: // fetchers
					lo, hi := st.StartOffset(), st.NextOffset()
					from := lo - 2 + rng.Int64N(hi-lo+5)
					rec.fetch(c, st, max(from, -1), 1+rng.IntN(1500))
				default: // trimmer
					lo, hi := st.StartOffset(), st.NextOffset()
					to := lo + rng.Int64N(hi-lo+1)
					if rng.IntN(6) == 0 {
						to = hi + 1 + rng.Int64N(3)
					}
					rec.trim(c, st, 0, to)
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	rec.check(e)
}

func caseLinCrossStore(e *env) {
	_, s2, name, w := e.readerSetup()
	readers := []*stream.Stream{e.openRO(s2, name), e.openRO(s2, name)}
	rec := newLinRecorder(e.ctx)
	per := e.h.scaled(60)
	var wg sync.WaitGroup
	var idMu sync.Mutex
	id := int64(0)
	seeds := make([]uint64, 4)
	for i := range seeds {
		seeds[i] = e.rng.Uint64()
	}
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(seeds[c])
			for range per {
				if c < 2 {
					idMu.Lock()
					id++
					myID := id
					idMu.Unlock()
					rec.append(c, w, 0, myID, 8+rng.IntN(600))
					continue
				}
				r := readers[c-2]
				hi := w.NextOffset()
				rec.fetch(c, r, rng.Int64N(hi+3), 1+rng.IntN(1500))
			}
		}()
	}
	wg.Wait()
	rec.check(e)
}

func caseLinTakeovers(e *env) {
	s1 := e.store()
	e.needSecond()
	s2 := e.second(s1)
	stores := []*stream.Store{s1, s2}
	name := e.name("s")
	if err := s1.Create(e.ctx, name); err != nil {
		e.t.Fatalf("create %q: %v", name, err)
	}
	var readers []*stream.Stream
	if s1.Info().ReadOnlyOpen {
		readers = []*stream.Stream{e.openRO(s1, name), e.openRO(s2, name)}
	}
	rec := newLinRecorder(e.ctx)
	type session struct {
		id int
		st *stream.Stream
	}
	var (
		cur      atomic.Pointer[session]
		openMu   sync.Mutex
		opened   []*stream.Stream
		openErr  error
		sessions = 1
	)
	// takeOver opens the next session on the other store and makes it
	// current.
	takeOver := func() bool {
		openMu.Lock()
		defer openMu.Unlock()
		k := sessions
		st, err := rec.open(99, stores[k%2], name, uint64(k), k)
		if err != nil {
			openErr = fmt.Errorf("open of session %d at epoch %d: %w", k, k, err)
			return false
		}
		opened = append(opened, st)
		cur.Store(&session{id: k, st: st})
		sessions++
		return true
	}
	defer func() {
		for _, st := range opened {
			e.closeStreamLater(st)
		}
	}()
	if !takeOver() {
		e.t.Fatalf("%v", openErr)
	}
	per := e.h.scaled(50)
	var idMu sync.Mutex
	id := int64(0)
	seeds := make([]uint64, 2+len(readers))
	for i := range seeds {
		seeds[i] = e.rng.Uint64()
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(seeds[w])
			var ss *session
			for i := range per {
				// A writer learns of a takeover only every 4 appends, so
				// it goes on writing as a stale session for a while.
				if i%4 == 0 {
					ss = cur.Load()
				}
				// Writer 0 also takes the stream over every 8 appends,
				// right before two appends on its now stale session.
				if w == 0 && i%8 == 1 && !takeOver() {
					return
				}
				idMu.Lock()
				id++
				myID := id
				idMu.Unlock()
				rec.append(w, ss.st, ss.id, myID, 8+rng.IntN(600))
				if rng.IntN(3) == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(seeds[2+i])
			for range per {
				hi := cur.Load().st.NextOffset()
				rec.fetch(2+i, r, rng.Int64N(hi+3), 1+rng.IntN(1500))
			}
		}()
	}
	wg.Wait()
	if openErr != nil {
		e.t.Fatalf("%v", openErr)
	}
	fenced := 0
	for _, op := range rec.ops {
		if op.Output.(linOutput).Fenced {
			fenced++
		}
	}
	// One more takeover, then read the whole log through it to settle
	// which fenced appends landed (see resolveFenced).
	if !takeOver() {
		e.t.Fatalf("%v", openErr)
	}
	rec.resolveFenced(cur.Load().st)
	landed := 0
	for _, op := range rec.ops {
		if op.Output.(linOutput).Landed {
			landed++
		}
	}
	e.t.Logf("%d sessions; %d appends failed ErrFenced, %d of them landed before their fence", sessions-2, fenced, landed)
	rec.check(e)
}
