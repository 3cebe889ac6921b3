package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/internal/trusted"
	"github.com/stratastream/strata/stream"
)

// gatedBase holds the first WAL append until gate closes and counts the
// WAL appends.
type gatedBase struct {
	stream.DriverStore
	gate    chan struct{}
	once    sync.Once
	opened  sync.Once
	appends atomic.Int64
}

// release lets the first WAL append through (once; later calls do nothing).
func (g *gatedBase) release() { g.opened.Do(func() { close(g.gate) }) }

// awaitFirst waits until the first WAL append has reached the base, or
// fails with why.
func (g *gatedBase) awaitFirst(ctx context.Context, t *testing.T, why string) {
	t.Helper()
	for g.appends.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal(why)
		}
		time.Sleep(time.Millisecond)
	}
}

func (g *gatedBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := g.DriverStore.Open(ctx, name, o)
	if err != nil || !strings.HasPrefix(name, DefaultPrefix+"/") {
		return st, err
	}
	return &gatedStream{DriverStream: st, g: g}, nil
}

type gatedStream struct {
	stream.DriverStream
	g *gatedBase
}

func (s *gatedStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	s.g.appends.Add(1)
	first := false
	s.g.once.Do(func() { first = true })
	if !first {
		return s.DriverStream.Append(ctx, b)
	}
	f, done := stream.NewAppendFuture()
	go func() {
		<-s.g.gate
		done(s.DriverStream.Append(ctx, b).Wait(ctx))
	}()
	return f
}

// TestFlushWhenIdle: with FlushWhenIdle an append to an idle WAL goes out
// at once, however long Linger is, and the appends queued while it is in
// flight share the next WAL batch, cut as soon as it completes.
func TestFlushWhenIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := &gatedBase{DriverStore: memory.New(memory.Config{}).Driver(), gate: make(chan struct{})}
	s, err := NewStore(stream.NewStore(g), Options{Linger: time.Hour, FlushWhenIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer g.release() // before Close, which flushes what is queued
	st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	first := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("first")})
	g.awaitFirst(ctx, t, "the first append did not reach the WAL while it was idle (it waits out Linger)")
	var rest []*stream.AppendFuture
	for i := range 3 {
		rest = append(rest, st.Append(ctx, stream.Batch{Count: 1, Payload: []byte{byte('0' + i)}}))
	}
	g.release()
	for i, f := range append([]*stream.AppendFuture{first}, rest...) {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if n := g.appends.Load(); n != 2 {
		t.Fatalf("%d WAL appends for one append and three queued behind it; want 2", n)
	}
}

// TestFlushHint: with FlushWhenIdle, a stream's Flush cuts the appends
// queued behind a WAL append in flight at once, not Linger after the last
// cut; without it Flush leaves them to Linger (at most one WAL batch per
// Linger).
func TestFlushHint(t *testing.T) {
	for _, idle := range []bool{true, false} {
		t.Run(fmt.Sprintf("FlushWhenIdle=%v", idle), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			g := &gatedBase{DriverStore: memory.New(memory.Config{}).Driver(), gate: make(chan struct{})}
			ws, err := NewStore(stream.NewStore(g), Options{Linger: time.Hour, FlushWhenIdle: idle})
			if err != nil {
				t.Fatal(err)
			}
			s := stream.NewStore(ws)
			defer s.Close()
			defer g.release()
			st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			// The first goes out at once (an idle WAL, or nothing cut for
			// Linger) and is held in flight; the second queues behind it.
			first := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("first")})
			g.awaitFirst(ctx, t, "the first append did not reach the WAL")
			second := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("second")})
			st.Flush()
			want := int64(1)
			if idle {
				want = 2
			}
			if n := g.appends.Load(); n != want {
				t.Fatalf("%d WAL appends after Flush with one in flight and one queued; want %d", n, want)
			}
			g.release()
			if _, err := first.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if idle {
				if res, err := second.Wait(ctx); err != nil || res.BaseOffset != 1 {
					t.Fatalf("the flushed append: %+v, %v; want offset 1", res, err)
				}
				return
			}
			if second.Completed() {
				t.Fatal("without FlushWhenIdle the queued append completed before Linger")
			}
			if err := s.Close(); err != nil { // flushes what is queued
				t.Fatal(err)
			}
			if res, err := second.Wait(ctx); err != nil || res.BaseOffset != 1 {
				t.Fatalf("the queued append after Close: %+v, %v; want offset 1", res, err)
			}
		})
	}
}

// TestFlushWhenIdleGroupsBackToBackAppends: appends one caller makes back
// to back to an idle WAL (the partitions of one Produce request) share a
// WAL batch: the idle cut waits for the flusher goroutine to run instead of
// taking the first append alone. Scheduling may split a round now and then;
// cutting inline splits every round (the first append alone, the rest
// behind it).
func TestFlushWhenIdleGroupsBackToBackAppends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := &gatedBase{DriverStore: memory.New(memory.Config{}).Driver(), gate: make(chan struct{})}
	close(g.gate)
	s, err := NewStore(stream.NewStore(g), Options{Linger: time.Hour, FlushWhenIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sts []stream.DriverStream
	for _, name := range []string{"a", "b", "c", "d"} {
		st, err := s.Open(ctx, name, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	// The first appends claim the streams (V.meta records); start after.
	for _, st := range sts {
		if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("claim")}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 200
	before := g.appends.Load()
	for range rounds {
		var fs []*stream.AppendFuture
		for _, st := range sts {
			fs = append(fs, st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("x")}))
		}
		for _, f := range fs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := g.appends.Load() - before
	t.Logf("%d WAL batches for %d rounds of %d back-to-back appends", n, rounds, len(sts))
	if n > rounds*3/2 {
		t.Fatalf("%d WAL batches for %d rounds of %d back-to-back appends to an idle WAL; want about one per round", n, rounds, len(sts))
	}
}

// TestLingerRunsFromTheLastCut: Linger is the interval between WAL
// batches. An append to a WAL that cut nothing for Linger goes out at once
// (a lone producer's request does not wait out the window); one made just
// after a cut waits until Linger after it.
func TestLingerRunsFromTheLastCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := &gatedBase{DriverStore: memory.New(memory.Config{}).Driver(), gate: make(chan struct{})}
	close(g.gate)
	const linger = 300 * time.Millisecond
	s, err := NewStore(stream.NewStore(g), Options{Linger: linger})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("claim")}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(linger) // nothing cut for Linger
	began := time.Now()
	if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("alone")}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d >= linger {
		t.Fatalf("an append to a WAL idle for Linger took %v: it waited out the window", d)
	}
	cut := time.Now() // about when "alone" was cut
	if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("next")}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(cut); d < linger*2/3 {
		t.Fatalf("an append made just after a cut went out after %v, before Linger (%v) since that cut", d, linger)
	}
}

// suppliedBase records, for each WAL append, whether it came with a
// supplied payload checksum, whether that is the checksum of its bytes,
// and whether its context marked it trusted (internal/trusted). With fill
// its WAL streams are Fillers (as nfs.LogStore's are): the checksum fill
// returns is recorded as the append's supplied one.
type suppliedBase struct {
	stream.DriverStore
	fill bool
	mu   sync.Mutex
	sums []string // "set" (right), "wrong" or "unset", "+trusted" if marked
}

func (s *suppliedBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := s.DriverStore.Open(ctx, name, o)
	if err != nil || !strings.HasPrefix(name, DefaultPrefix+"/") {
		return st, err
	}
	if s.fill {
		return &fillingStream{suppliedStream{DriverStream: st, s: s}}, nil
	}
	return &suppliedStream{DriverStream: st, s: s}, nil
}

type suppliedStream struct {
	stream.DriverStream
	s *suppliedBase
}

func (st *suppliedStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	v := "unset"
	switch {
	case b.PayloadChecksumSet && b.PayloadChecksum == stream.Checksum(b.Payload):
		v = "set"
	case b.PayloadChecksumSet:
		v = "wrong"
	}
	if trusted.Checksum(ctx) {
		v += "+trusted"
	}
	st.s.mu.Lock()
	st.s.sums = append(st.s.sums, v)
	st.s.mu.Unlock()
	return st.DriverStream.Append(ctx, b)
}

type fillingStream struct{ suppliedStream }

func (st *fillingStream) AppendFill(ctx context.Context, b stream.Batch, n int, fill func([]byte) uint32) (*stream.AppendFuture, bool) {
	b.Payload = make([]byte, n)
	b.PayloadChecksum, b.PayloadChecksumSet = fill(b.Payload), true
	return st.Append(ctx, b), true
}

// TestFlushChecksTheCopies: a WAL batch goes to the base with its checksum
// supplied (combined from the entries', not read again) and marked trusted
// (the base need not read it either), and the tails
// serve the entries without reading them again; but a caller that changes
// its buffer after Append and before its append completes (which the
// contract forbids) gets ErrCorrupt on reads of its own batch, from the
// writer and after a takeover, while the other stream's batch in the same
// WAL batch reads back intact, and no WAL batch ever went out with a
// supplied checksum that is not its own, or marked trusted without one;
// into a base that builds the batch in its own buffer (stream.Filler), as
// into one that copies it.
func TestFlushChecksTheCopies(t *testing.T) {
	for _, fill := range []bool{false, true} {
		t.Run(fmt.Sprintf("fill=%v", fill), func(t *testing.T) { testFlushChecksTheCopies(t, fill) })
	}
}

func testFlushChecksTheCopies(t *testing.T, fill bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New(memory.Config{})
	base := &suppliedBase{DriverStore: mem.Driver(), fill: fill}
	s, ws := walStore(t, base, Options{Linger: time.Second})
	open := opener(ctx, t)
	a, b := open(s, "a", 1), open(s, "b", 1)
	for _, st := range []*stream.Stream{a, b} { // claims the WAL
		if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("first")}).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	bufA, bufB := []byte("batch of a"), []byte("batch of b")
	fa := a.Append(ctx, stream.Batch{Count: 1, Payload: bufA})
	fb := b.Append(ctx, stream.Batch{Count: 1, Payload: bufB})
	// Within the linger window, before the copy; under the WAL writer's
	// lock, which the cut takes, so that the race detector sees the order.
	ws.mu.Lock()
	w := ws.w
	ws.mu.Unlock()
	w.mu.Lock()
	bufA[0] = 'X'
	w.mu.Unlock()
	for _, f := range []*stream.AppendFuture{fa, fb} {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(who string, a, b *stream.Stream) {
		t.Helper()
		if bs, err := a.Fetch(ctx, 1, 2, 0); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("%s: fetch of the batch whose buffer changed: %d batches, %v; want ErrCorrupt", who, len(bs), err)
		}
		bs, err := b.Fetch(ctx, 0, 2, 0)
		if err != nil || len(bs) != 2 || string(bs[0].Payload) != "first" || string(bs[1].Payload) != "batch of b" {
			t.Fatalf("%s: the other stream's batches: %d, %v; want first, batch of b", who, len(bs), err)
		}
	}
	check("the writer", a, b)
	base.mu.Lock()
	sums := slices.Clone(base.sums)
	base.mu.Unlock()
	switch {
	case fill:
		// fill's checksum is taken unread: it must be the batch's, the
		// one with the changed buffer too.
		if len(sums) < 2 || slices.ContainsFunc(sums, func(v string) bool { return v != "set" }) {
			t.Fatalf("WAL appends' checksums from fill: %v; want each the batch's", sums)
		}
	case len(sums) < 2 || sums[0] != "set+trusted" || !slices.Contains(sums, "unset"):
		t.Fatalf("WAL appends' supplied checksums: %v; want the first supplied and trusted, the one with the changed buffer not", sums)
	default:
		for _, v := range sums {
			if v != "set+trusted" && v != "unset" {
				t.Fatalf("WAL appends' supplied checksums: %v; want each supplied and trusted or neither", sums)
			}
		}
	}
	t.Logf("WAL appends: %v", sums)
	s2, _ := walStore(t, mem.Driver(), Options{})
	b2 := open(s2, "b", 2)
	if a2, err := s2.Open(ctx, "a", stream.OpenOptions{Epoch: 2}); err != nil {
		if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("takeover of the stream whose buffer changed: %v; want ErrCorrupt or a stream whose fetch is", err)
		}
		if bs, err := b2.Fetch(ctx, 0, 2, 0); err != nil || len(bs) != 2 || string(bs[1].Payload) != "batch of b" {
			t.Fatalf("takeover: the other stream's batches: %d, %v", len(bs), err)
		}
	} else {
		check("a takeover", a2, b2)
	}
}

// TestWrongSuppliedChecksum: Append takes a supplied checksum unread; a
// wrong one is caught at the copy into the WAL batch, and only that
// batch's reads fail, by the writer and by a takeover, while a stream
// sharing its WAL batch reads its own.
func TestWrongSuppliedChecksum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := memory.New(memory.Config{})
	s, _ := walStore(t, mem.Driver(), Options{Linger: time.Second})
	open := opener(ctx, t)
	a, b := open(s, "a", 1), open(s, "b", 1)
	pa, pb := []byte("batch of a"), []byte("batch of b")
	fa := a.Append(ctx, stream.Batch{Count: 1, Payload: pa, PayloadChecksum: stream.Checksum(pa) ^ 1, PayloadChecksumSet: true})
	fb := b.Append(ctx, stream.Batch{Count: 1, Payload: pb, PayloadChecksum: stream.Checksum(pb), PayloadChecksumSet: true})
	if _, err := fb.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := fa.Wait(ctx); err == nil {
		t.Logf("the batch with a wrong checksum was stored at %d; its reads must fail", r.BaseOffset)
	} else if !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("append with a wrong supplied checksum: %v; want success or ErrCorrupt", err)
	}
	check := func(who string, a, b *stream.Stream) {
		t.Helper()
		if bs, err := a.Fetch(ctx, 0, 1, 0); !errors.Is(err, stream.ErrCorrupt) && (err != nil || len(bs) != 0) {
			t.Fatalf("%s: fetch of the batch with a wrong checksum: %d batches, %v; want ErrCorrupt or nothing stored", who, len(bs), err)
		}
		bs, err := b.Fetch(ctx, 0, 1, 0)
		if err != nil || len(bs) != 1 || string(bs[0].Payload) != "batch of b" {
			t.Fatalf("%s: the other stream's batch: %d, %v; want batch of b", who, len(bs), err)
		}
	}
	check("the writer", a, b)
	s2, _ := walStore(t, mem.Driver(), Options{})
	b2 := open(s2, "b", 2)
	a2, err := s2.Open(ctx, "a", stream.OpenOptions{Epoch: 2})
	if err != nil {
		if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("takeover of the stream with a wrong checksum: %v; want ErrCorrupt or a stream whose fetch is", err)
		}
		return
	}
	check("a takeover", a2, b2)
}

// opener returns a function opening (creating if missing) a stream of a
// store at an epoch, failing t on an error.
func opener(ctx context.Context, t *testing.T) func(s *stream.Store, name string, epoch uint64) *stream.Stream {
	return func(s *stream.Store, name string, epoch uint64) *stream.Stream {
		t.Helper()
		st, err := s.Open(ctx, name, stream.OpenOptions{Epoch: epoch, CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// walStore is a store of virtual streams over base, closed when t ends.
func walStore(t *testing.T, base stream.DriverStore, opts Options) (*stream.Store, *Store) {
	t.Helper()
	ws, err := NewStore(stream.NewStore(base), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := stream.NewStore(ws)
	t.Cleanup(func() { s.Close() })
	return s, ws
}
