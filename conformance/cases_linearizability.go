package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyLinearizability,
	Case{Name: "single-session", Doc: "concurrent appends, fetches and trims by several clients on one session form a linearizable log history (porcupine)", Randomised: true, run: caseLinSingleSession},
	Case{Name: "cross-store-readers", Doc: "appends on one store and fetches by read-only readers on a second store form a linearizable history (porcupine)", Randomised: true, run: caseLinCrossStore},
)

// The log model: the state is the start offset, the next offset and the
// batches (base, count, id) appended so far. A batch's id is its Timestamp.

type linKind byte

const (
	linAppend linKind = 'a'
	linFetch  linKind = 'f'
	linTrim   linKind = 't'
)

type linInput struct {
	Kind     linKind
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
	Base  int64      // append
	Range bool       // ErrOffsetOutOfRange
	Got   []linBatch // fetch
}

type linState struct {
	start, next int64
	batches     []linBatch // append order; base offsets increasing
	counts      []uint32
}

var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		switch in.Kind {
		case linAppend:
			if out.Range || out.Base != s.next {
				return false, s
			}
			n := linState{start: s.start, next: s.next + int64(in.Count)}
			n.batches = append(append(make([]linBatch, 0, len(s.batches)+1), s.batches...), linBatch{Base: s.next, ID: in.ID})
			n.counts = append(append(make([]uint32, 0, len(s.counts)+1), s.counts...), in.Count)
			return true, n
		case linTrim:
			if in.Offset > s.next {
				return out.Range, s
			}
			if out.Range {
				return false, s
			}
			n := s
			n.start = max(s.start, in.Offset)
			return true, n
		case linFetch:
			if in.Offset < s.start || in.Offset > s.next {
				return out.Range, s
			}
			if out.Range {
				return false, s
			}
			if in.Offset == s.next {
				return len(out.Got) == 0, s
			}
			i := sort.Search(len(s.batches), func(i int) bool {
				return s.batches[i].Base+int64(s.counts[i]) > in.Offset
			})
			if len(out.Got) == 0 || len(out.Got) > len(s.batches)-i {
				return false, s
			}
			for j, g := range out.Got {
				if g != s.batches[i+j] {
					return false, s
				}
			}
			return true, s
		}
		return false, s
	},
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		if x.start != y.start || x.next != y.next || len(x.batches) != len(y.batches) {
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
			return fmt.Sprintf("append(id %d, count %d) -> %d", in.ID, in.Count, out.Base)
		case linTrim:
			return fmt.Sprintf("trim(%d) -> range=%v", in.Offset, out.Range)
		}
		return fmt.Sprintf("fetch(%d, max %d) -> range=%v %v", in.Offset, in.MaxBytes, out.Range, out.Got)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("[%d, %d) %d batches", s.start, s.next, len(s.batches))
	},
}

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

func (r *linRecorder) append(client int, st stream.Stream, id int64, size int) {
	b := stream.Batch{Count: uint32(1 + id%4), Timestamp: id, Payload: payload("lin", int(id), size)}
	r.mu.Lock()
	r.payloads[id] = b.Payload
	r.mu.Unlock()
	in := linInput{Kind: linAppend, ID: id, Count: b.Count}
	call := r.now()
	res, err := stream.Append(r.ctx, st, b)
	if err != nil {
		r.fail("client %d: append id %d: %v", client, id, err)
		return
	}
	r.add(client, in, call, linOutput{Base: res.BaseOffset})
}

func (r *linRecorder) fetch(client int, st stream.Stream, start int64, maxBytes int) {
	in := linInput{Kind: linFetch, Offset: start, MaxBytes: maxBytes}
	call := r.now()
	bs, err := st.Fetch(r.ctx, start, stream.NoEnd, maxBytes)
	var out linOutput
	switch {
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		out.Range = true
	case err != nil:
		r.fail("client %d: fetch from %d: %v", client, start, err)
		return
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
}

func (r *linRecorder) trim(client int, st stream.Stream, to int64) {
	in := linInput{Kind: linTrim, Offset: to}
	call := r.now()
	err := st.Trim(r.ctx, to)
	var out linOutput
	switch {
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		out.Range = true
	case err != nil:
		r.fail("client %d: trim to %d: %v", client, to, err)
		return
	}
	r.add(client, in, call, out)
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
					rec.append(c, st, newID(), 8+rng.IntN(600))
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
					rec.trim(c, st, to)
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
	readers := []stream.Stream{e.openRO(s2, name), e.openRO(s2, name)}
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
					rec.append(c, w, myID, 8+rng.IntN(600))
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
