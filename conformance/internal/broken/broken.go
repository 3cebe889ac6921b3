// Package broken holds deliberately broken drivers: memory stores wrapped
// so that each breaks one rule of the Stream contract. The conformance
// package's own tests run its cases against them to prove that the suite
// can fail, and that the right cases catch each defect.
//
// Nothing outside the conformance tests should use it.
package broken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// Kind names a defect.
type Kind string

// The defects.
const (
	// None is the healthy memory driver, unwrapped: the control group.
	None Kind = "none"
	// IgnoresFencing lets a fenced session go on appending (its appends
	// are quietly redirected to the newest session) and turns a refused
	// lower-epoch open into a handle on the newest session.
	IgnoresFencing Kind = "ignores-fencing"
	// ReordersAcks completes pipelined appends in swapped pairs: the later
	// future of each pair completes first.
	ReordersAcks Kind = "reorders-acks"
	// LosesLastOnCrash drops the last acknowledged batch of every stream a
	// crashed store wrote to.
	LosesLastOnCrash Kind = "loses-last-on-crash"
	// FlipsByte flips one payload bit in every fetched batch at an odd base
	// offset with a payload of 8 bytes or more, and returns it as good data.
	FlipsByte Kind = "flips-byte"
	// StaleTrim lets a fenced session's trim through (redirected to the
	// newest session).
	StaleTrim Kind = "stale-trim"
	// IgnoresSuppliedChecksum drops the payload checksum a caller supplies
	// with a batch (stream.Batch.PayloadChecksum) and checksums the payload
	// itself, so a batch whose supplied checksum is wrong is stored and
	// served as good data.
	IgnoresSuppliedChecksum Kind = "ignores-supplied-checksum"
)

// Kinds lists every defect (not None).
var Kinds = []Kind{IgnoresFencing, ReordersAcks, LosesLastOnCrash, FlipsByte, StaleTrim, IgnoresSuppliedChecksum}

// Harness returns a conformance harness on in-process memory stores with
// defect k. Each NewStore gets a namespace of its own; Second and Crash open
// stores on the same namespace, as in-process memory harnesses do.
func Harness(k Kind) conformance.Harness {
	var (
		mu     sync.Mutex
		nsOf   = map[*stream.Store]*world{}
		worlds atomic.Int64
	)
	open := func(w *world) *stream.Store {
		s := memory.New(memory.Config{Namespace: w.ns})
		if k != None {
			s = stream.NewStore(&store{DriverStore: s.Driver(), w: w})
		}
		mu.Lock()
		nsOf[s] = w
		mu.Unlock()
		return s
	}
	same := func(t conformance.T, s *stream.Store) *world {
		mu.Lock()
		defer mu.Unlock()
		w, ok := nsOf[s]
		if !ok {
			t.Fatalf("broken harness: store %p was not opened by the harness", s)
		}
		return w
	}
	return conformance.Harness{
		NewStore: func(t conformance.T) *stream.Store {
			return open(newWorld(k, fmt.Sprintf("broken-%s-%d-%d", k, time.Now().UnixNano(), worlds.Add(1))))
		},
		Second: func(t conformance.T, s *stream.Store) *stream.Store { return open(same(t, s)) },
		Crash: func(t conformance.T, s *stream.Store) *stream.Store {
			w := same(t, s)
			if k == LosesLastOnCrash {
				if err := w.loseLast(t.Context(), s.Driver().(*store)); err != nil {
					t.Fatalf("broken harness: %v", err)
				}
			}
			return open(w)
		},
	}
}

// world is the state shared by the stores of one namespace.
type world struct {
	kind Kind
	ns   string

	mu     sync.Mutex
	latest map[string]stream.DriverStream // newest read-write session per stream
	epochs map[string]uint64              // highest epoch opened per stream
	last   map[*store]map[string]int64    // base of the last ack, per store and stream
}

func (w *world) newest(name string) stream.DriverStream {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest[name]
}

// loseLast rewrites every stream s acked appends on without its last acked
// batch.
func (w *world) loseLast(ctx context.Context, s *store) error {
	w.mu.Lock()
	last := w.last[s]
	delete(w.last, s)
	epochs := make(map[string]uint64, len(last))
	for name := range last {
		epochs[name] = w.epochs[name]
	}
	w.mu.Unlock()
	m := memory.New(memory.Config{Namespace: w.ns})
	for name, base := range last {
		st, err := m.Open(ctx, name, stream.OpenOptions{Epoch: epochs[name]})
		if err != nil {
			return err
		}
		start := st.StartOffset()
		var keep []stream.Batch
		for next := start; next < st.NextOffset(); {
			bs, err := st.Fetch(ctx, next, stream.NoEnd, 0)
			if err != nil {
				return err
			}
			for _, b := range bs {
				if b.BaseOffset < base {
					keep = append(keep, b)
				}
			}
			next = bs[len(bs)-1].EndOffset()
		}
		if err := m.Delete(ctx, name); err != nil {
			return err
		}
		st, err = m.Open(ctx, name, stream.OpenOptions{Epoch: epochs[name], CreateIfMissing: true})
		if err != nil {
			return err
		}
		// Keep the offsets: one filler batch stands for the trimmed prefix.
		padTo := base
		if len(keep) > 0 {
			padTo = keep[0].BaseOffset
		}
		if padTo > 0 {
			if _, err := stream.Append(ctx, st, stream.Batch{Count: uint32(padTo)}); err != nil {
				return err
			}
		}
		for _, b := range keep {
			if _, err := stream.Append(ctx, st, b); err != nil {
				return err
			}
		}
		if err := st.Trim(ctx, min(start, st.NextOffset())); err != nil {
			return err
		}
	}
	return nil
}

// store wraps a memory driver with its world's defect.
type store struct {
	stream.DriverStore
	w *world
}

func (s *store) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	st, err := s.DriverStore.Open(ctx, name, opts)
	if err != nil {
		if s.w.kind == IgnoresFencing && errors.Is(err, stream.ErrFenced) {
			if cur := s.w.newest(name); cur != nil {
				return &session{DriverStream: cur, s: s}, nil
			}
		}
		return nil, err
	}
	if opts.Mode == stream.ModeReadWrite {
		s.w.mu.Lock()
		s.w.latest[name] = st
		s.w.epochs[name] = max(s.w.epochs[name], opts.Epoch)
		s.w.mu.Unlock()
	}
	return &session{DriverStream: st, s: s}, nil
}

// session wraps a memory session with its world's defect.
type session struct {
	stream.DriverStream
	s *store

	mu   sync.Mutex
	pend *pending // ReordersAcks: an append waiting for a partner
}

type pending struct {
	f        *stream.AppendFuture
	complete func(stream.AppendResult, error)
}

// forward completes complete with f's outcome once f is done.
func forward(f *stream.AppendFuture, complete func(stream.AppendResult, error)) {
	complete(f.Result())
}

func (h *session) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	w := h.s.w
	if w.kind == IgnoresSuppliedChecksum {
		b.PayloadChecksum, b.PayloadChecksumSet = 0, false
	}
	f := h.DriverStream.Append(ctx, b)
	switch w.kind {
	case IgnoresFencing:
		out, complete := stream.NewAppendFuture()
		go func() {
			r, err := f.Result()
			if errors.Is(err, stream.ErrFenced) {
				if cur := w.newest(h.Name()); cur != nil && cur != h.DriverStream {
					r, err = cur.Append(ctx, b).Result()
				}
			}
			complete(r, err)
		}()
		return out
	case LosesLastOnCrash:
		out, complete := stream.NewAppendFuture()
		go func() {
			r, err := f.Result()
			if err == nil {
				w.mu.Lock()
				if w.last[h.s] == nil {
					w.last[h.s] = map[string]int64{}
				}
				w.last[h.s][h.Name()] = max(w.last[h.s][h.Name()], r.BaseOffset)
				w.mu.Unlock()
			}
			complete(r, err)
		}()
		return out
	case ReordersAcks:
		out, complete := stream.NewAppendFuture()
		h.mu.Lock()
		if h.pend == nil {
			p := &pending{f: f, complete: complete}
			h.pend = p
			h.mu.Unlock()
			go func() {
				time.Sleep(5 * time.Millisecond)
				h.mu.Lock()
				alone := h.pend == p
				if alone {
					h.pend = nil
				}
				h.mu.Unlock()
				if alone {
					forward(p.f, p.complete)
				}
			}()
			return out
		}
		p := h.pend
		h.pend = nil
		h.mu.Unlock()
		go func() {
			forward(f, complete) // the later append completes first
			time.Sleep(2 * time.Millisecond)
			forward(p.f, p.complete)
		}()
		return out
	}
	return f
}

func (h *session) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	bs, err := h.DriverStream.Fetch(ctx, start, end, maxBytes)
	if h.s.w.kind == FlipsByte {
		for i, b := range bs {
			if b.BaseOffset%2 == 1 && len(b.Payload) >= 8 {
				p := append([]byte(nil), b.Payload...)
				p[len(p)/2] ^= 0x10
				bs[i].Payload = p
			}
		}
	}
	return bs, err
}

func (h *session) Trim(ctx context.Context, newStart int64) error {
	err := h.DriverStream.Trim(ctx, newStart)
	if h.s.w.kind == StaleTrim && errors.Is(err, stream.ErrFenced) {
		if cur := h.s.w.newest(h.Name()); cur != nil && cur != h.DriverStream {
			return cur.Trim(ctx, newStart)
		}
	}
	return err
}

// Config is the config document of the broken drivers' plugin binary
// (cmd/strata-driver-broken).
type Config struct {
	// Kind is the defect (see Kinds); empty or "none" is the healthy driver.
	Kind Kind `json:"kind"`
	// Namespace is the memory namespace; stores of one process with the
	// same Namespace share streams.
	Namespace string `json:"namespace"`
}

var (
	worldsMu   sync.Mutex
	worldsByNS = map[string]*world{}
)

// Open is the stream.Opener of the broken drivers' plugin binary: config is
// a JSON Config.
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	var c Config
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("%w: broken driver config: %v", stream.ErrInvalidArgument, err)
	}
	if c.Kind != "" && c.Kind != None && !slices.Contains(Kinds, c.Kind) {
		return nil, fmt.Errorf("%w: broken driver config: unknown kind %q", stream.ErrInvalidArgument, c.Kind)
	}
	if c.Kind == "" {
		c.Kind = None
	}
	m := memory.New(memory.Config{Namespace: c.Namespace})
	if c.Kind == None {
		return m, nil
	}
	worldsMu.Lock()
	defer worldsMu.Unlock()
	w := worldsByNS[c.Namespace]
	if w == nil || c.Namespace == "" {
		w = newWorld(c.Kind, c.Namespace)
		worldsByNS[c.Namespace] = w
	}
	return stream.NewStore(&store{DriverStore: m.Driver(), w: w}), nil
}

func newWorld(k Kind, ns string) *world {
	return &world{
		kind:   k,
		ns:     ns,
		latest: map[string]stream.DriverStream{},
		epochs: map[string]uint64{},
		last:   map[*store]map[string]int64{},
	}
}
