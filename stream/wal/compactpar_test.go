package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// slowDataBase acknowledges every append to a data stream (V.data) late
// and records the most it saw in flight at once. With failAt n, the n-th
// data append (from 1) lands but is reported ErrUnavailable: an outcome
// the writer cannot know.
type slowDataBase struct {
	stream.DriverStore
	inflight, most, appends atomic.Int64
	failAt                  int64
	// holdFor, when set, holds every ack until that many appends were
	// made (or 5 s passed), so that later appends are in flight when an
	// earlier one completes however slowly the goroutines run.
	holdFor atomic.Int64
}

func (b *slowDataBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := b.DriverStore.Open(ctx, name, o)
	if err != nil || !strings.HasSuffix(name, dataSuffix) {
		return st, err
	}
	return &slowDataStream{DriverStream: st, b: b}, nil
}

func (b *slowDataBase) Close() error { return nil }

type slowDataStream struct {
	stream.DriverStream
	b *slowDataBase
}

func (s *slowDataStream) Append(ctx context.Context, batch stream.Batch) *stream.AppendFuture {
	n := s.b.inflight.Add(1)
	fail := s.b.appends.Add(1) == s.b.failAt
	for m := s.b.most.Load(); n > m && !s.b.most.CompareAndSwap(m, n); m = s.b.most.Load() {
	}
	inner := s.DriverStream.Append(ctx, batch) // in call order, as the contract wants
	f, done := stream.NewAppendFuture()
	go func() {
		r, err := inner.Wait(ctx)
		time.Sleep(5 * time.Millisecond) // a slow put: acknowledged late
		for wait := time.Now().Add(5 * time.Second); s.b.appends.Load() < s.b.holdFor.Load() && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
		s.b.inflight.Add(-1)
		if fail && err == nil {
			r, err = stream.AppendResult{}, fmt.Errorf("%w: injected: the put's outcome is unknown", stream.ErrUnavailable)
		}
		done(r, err)
	}()
	return f
}

// TestCompactParallelismBoundsCopies checks that a compaction pass has at
// most CompactParallelism data-stream appends in flight, over all the
// streams it copies, that it copies every tail whole, that a pass finding
// compaction far behind takes BehindCompactParallelism, and (the check's
// own check) that a larger setting does put more in flight.
func TestCompactParallelismBoundsCopies(t *testing.T) {
	const streams, perStream = 6, 5 // each tail: 5 runs of about 1 MiB
	for _, tc := range []struct {
		par      int
		behind   bool // a background pass that finds compaction far behind
		atMost   int64
		atLeast  int64
		describe string
	}{
		{par: 2, atMost: 2, atLeast: 1, describe: "bounded"},
		{par: 16, atMost: 16, atLeast: 3, describe: "unbounded enough to show the bound"},
		{par: 1, behind: true, atMost: BehindCompactParallelism, atLeast: 3, describe: "far behind: BehindCompactParallelism"},
	} {
		t.Run(fmt.Sprint(tc.par, "-behind-", tc.behind), func(t *testing.T) {
			ctx := context.Background()
			mem := memory.New(memory.Config{})
			defer mem.Close()
			base := &slowDataBase{DriverStore: mem.Driver()}
			s, err := NewStore(stream.NewStore(base), Options{SweepInterval: -1, CompactParallelism: tc.par})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			payload := func(i, j int) []byte { return bytes.Repeat([]byte{byte(i*perStream + j)}, maxRunBytes-4096) }
			for i := range streams {
				st, err := s.Open(ctx, fmt.Sprint("s", i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				for j := range perStream {
					if _, err := stream.Append(ctx, st, stream.Batch{Count: 1, Payload: payload(i, j)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			base.most.Store(0)
			base.holdFor.Store(base.appends.Load() + tc.atLeast)
			// The tails (30 MiB) are under CompactBytes: no background pass
			// runs; this one is what a pass due and far behind would be.
			if tc.behind {
				err = s.pass(ctx, passPlan{all: true, backlog: 5 * DefaultCompactBytes})
			} else {
				err = s.Compact(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("CompactParallelism %d: at most %d data appends in flight", tc.par, base.most.Load())
			if m := base.most.Load(); m > tc.atMost || m < tc.atLeast {
				t.Fatalf("CompactParallelism %d (%s): at most %d data appends in flight; want %d to %d", tc.par, tc.describe, m, tc.atLeast, tc.atMost)
			}
			for i := range streams {
				ro, err := s.Open(ctx, fmt.Sprint("s", i), stream.OpenOptions{Mode: stream.ModeReadOnly})
				if err != nil {
					t.Fatal(err)
				}
				bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
				ro.Close()
				if err != nil || len(bs) != perStream {
					t.Fatalf("s%d after compaction: %d batches, %v", i, len(bs), err)
				}
				for j, b := range bs {
					if !bytes.Equal(b.Payload, payload(i, j)) {
						t.Fatalf("s%d batch %d: wrong bytes after compaction", i, j)
					}
				}
			}
		})
	}
}

// TestCompactCopyFailureReturnsSlots checks a copy whose V.data append
// fails while later ones of the same tail are in flight: the copy waits
// for those, returns every slot it took (a pass's others would otherwise
// wait for ever), and the next pass finds V.data's real end (the failed
// append landed) and finishes the copy, every batch once at its offset.
func TestCompactCopyFailureReturnsSlots(t *testing.T) {
	const runs = 6
	ctx := context.Background()
	mem := memory.New(memory.Config{})
	defer mem.Close()
	base := &slowDataBase{DriverStore: mem.Driver(), failAt: 2}
	base.holdFor.Store(3)
	s, err := NewStore(stream.NewStore(base), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload := func(j int) []byte { return bytes.Repeat([]byte{byte(j)}, maxRunBytes-4096) }
	st, err := s.Open(ctx, "s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for j := range runs {
		if _, err := stream.Append(ctx, st, stream.Batch{Count: 1, Payload: payload(j)}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	h := s.handles["s"]
	s.mu.Unlock()
	slots := newAppendSlots(4, 0)
	h.opMu.Lock()
	err = h.compact(ctx, kindCompact, slots)
	h.opMu.Unlock()
	if !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("copy with its second V.data append failing: %v; want ErrUnavailable", err)
	}
	if base.most.Load() < 2 {
		t.Fatalf("at most %d V.data appends in flight: the failure met none outstanding", base.most.Load())
	}
	if n := len(slots.ch); n != 0 {
		t.Fatalf("%d of 4 slots still taken after the failed copy returned", n)
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatalf("the pass after the failure: %v", err)
	}
	ro, err := s.Open(ctx, "s", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	ro.Close()
	if err != nil || len(bs) != runs {
		t.Fatalf("after the failed and the next pass: %d batches, %v; want %d", len(bs), err, runs)
	}
	for j, b := range bs {
		if b.BaseOffset != int64(j) || !bytes.Equal(b.Payload, payload(j)) {
			t.Fatalf("batch %d: offset %d, bytes equal %v", j, b.BaseOffset, bytes.Equal(b.Payload, payload(j)))
		}
	}
	data, err := mem.Driver().Open(ctx, testDataName(t, s, "s"), stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	if next := data.NextOffset(); next != runs {
		t.Fatalf("V.data ends at %d; want %d (each batch once)", next, runs)
	}
}

// TestDuePlan checks when a background pass is due and what it takes:
// nothing below CompactBytes while every tail is young; at CompactBytes a
// pass taking the tails of at least a quarter of the average, which knows
// the bytes held (its backlog, which sets its parallelism); an old tail
// makes a pass due on its own, which takes the tails older than half of
// CompactInterval and leaves a young small one.
func TestDuePlan(t *testing.T) {
	now := time.Now()
	store := func(tails ...int) *Store {
		s := &Store{opts: Options{CompactBytes: 1000, CompactInterval: time.Minute}, handles: map[string]*vstream{}}
		for i, n := range tails {
			s.handles[fmt.Sprint("s", i)] = &vstream{cl: &claim{tail: make([]tailEntry, 1), tailBytes: n, oldest: now}}
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		tails   []int
		due     bool
		minTail int64
	}{
		{name: "under CompactBytes", tails: []int{300, 300, 399}},
		{name: "at CompactBytes", tails: []int{500, 300, 200}, due: true, minTail: 1000 / 3 / 4},
		{name: "one below twice CompactBytes", tails: []int{1000, 999}, due: true, minTail: 1999 / 2 / 4},
		{name: "twice CompactBytes", tails: []int{1000, 600, 400}, due: true, minTail: 2000 / 3 / 4},
	} {
		plan, due := store(tc.tails...).due()
		held := int64(0)
		for _, n := range tc.tails {
			held += int64(n)
		}
		if due != tc.due || plan.backlog != held || (tc.due && plan.minTail != tc.minTail) {
			t.Errorf("%s %v: due %v, backlog %d, minTail %d; want %v, %d, %d", tc.name, tc.tails, due, plan.backlog, plan.minTail, tc.due, held, tc.minTail)
		}
	}
	s := store(10, 20)
	s.handles["s0"].cl.oldest = now.Add(-61 * time.Second)
	plan, due := s.due()
	if !due || plan.parallelism(s.opts) != s.opts.CompactParallelism {
		t.Fatalf("a tail older than CompactInterval: due %v, parallelism %d; want a pass at CompactParallelism", due, plan.parallelism(s.opts))
	}
	if !plan.take(10, now.Add(-61*time.Second), 0) || !plan.take(10, now.Add(-31*time.Second), 0) || plan.take(20, now, 0) {
		t.Fatalf("aged pass: takes %v (61 s), %v (31 s), %v (young, small); want true, true, false",
			plan.take(10, now.Add(-61*time.Second), 0), plan.take(10, now.Add(-31*time.Second), 0), plan.take(20, now, 0))
	}
	if !plan.take(20, now, plan.maxPin+1) {
		t.Fatal("aged pass: a young tail pinning more than half CompactBytes of WAL is left")
	}
}

// TestPassParallelism checks the V.data appends a pass has in flight:
// CompactParallelism until the tails hold twice CompactBytes, then
// doubled for each CompactBytes more, up to BehindCompactParallelism (or
// CompactParallelism if that is larger), never fewer than it.
func TestPassParallelism(t *testing.T) {
	const cb = 1000
	for _, tc := range []struct {
		par     int
		backlog int64
		want    int
	}{
		{1, 0, 1}, {1, 1999, 1}, {1, 2000, 2}, {1, 3000, 4}, {1, 4999, 8}, {1, 5000, 16}, {1, 1 << 40, 16},
		{4, 1999, 4}, {4, 2000, 8}, {4, 3000, 16}, {4, 9000, 16},
		{32, 0, 32}, {32, 2000, 32}, {32, 1 << 40, 32},
	} {
		got := passPlan{backlog: tc.backlog}.parallelism(Options{CompactParallelism: tc.par, CompactBytes: cb})
		if got != tc.want {
			t.Errorf("CompactParallelism %d, %d bytes held (CompactBytes %d): %d appends in flight, want %d", tc.par, tc.backlog, cb, got, tc.want)
		}
	}
}

// busyWALBase holds every WAL append while hold is set, keeping the WAL
// busy, and counts the appends to data streams (compaction's copies).
type busyWALBase struct {
	stream.DriverStore
	hold        atomic.Pointer[chan struct{}]
	dataAppends atomic.Int64
}

func (b *busyWALBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := b.DriverStore.Open(ctx, name, o)
	if err != nil {
		return st, err
	}
	return &busyWALStream{DriverStream: st, b: b, wal: strings.HasPrefix(name, DefaultPrefix+"/"), data: strings.HasSuffix(name, dataSuffix)}, nil
}

func (b *busyWALBase) Close() error { return nil }

type busyWALStream struct {
	stream.DriverStream
	b         *busyWALBase
	wal, data bool
}

// AppendFill takes no batch: every append goes through Append.
func (s *busyWALStream) AppendFill(context.Context, stream.Batch, int, func([]byte) uint32) (*stream.AppendFuture, bool) {
	return nil, false
}

func (s *busyWALStream) Append(ctx context.Context, batch stream.Batch) *stream.AppendFuture {
	if s.data {
		s.b.dataAppends.Add(1)
	}
	hold := s.b.hold.Load()
	if !s.wal || hold == nil {
		return s.DriverStream.Append(ctx, batch)
	}
	f, done := stream.NewAppendFuture()
	go func() {
		<-*hold
		done(s.DriverStream.Append(ctx, batch).Wait(ctx))
	}()
	return f
}

// TestCompactYield: with CompactYield a compaction copy waits while the WAL
// is busy and goes once it is idle; it waits at most CompactYield after the
// WAL turned busy; and it does not wait at all without CompactYield, in a
// pass that finds compaction behind, or in a close's copy.
func TestCompactYield(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yield time.Duration
		run   string // what copies a's tail: "pass" (Compact), "behind", "close"
		// waits: the copy is still waiting after the WAL was busy for
		// 200 ms; else the copy is done with the WAL still busy.
		waits bool
	}{
		{name: "waits-for-idle", yield: time.Hour, run: "pass", waits: true},
		{name: "bounded", yield: 50 * time.Millisecond, run: "pass"},
		{name: "off", yield: 0, run: "pass"},
		{name: "behind", yield: time.Hour, run: "behind"},
		{name: "close", yield: time.Hour, run: "close"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			mem := memory.New(memory.Config{})
			defer mem.Close()
			base := &busyWALBase{DriverStore: mem.Driver()}
			s, err := NewStore(stream.NewStore(base), Options{SweepInterval: -1, FlushWhenIdle: true, CompactYield: tc.yield})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			a, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for i := range 3 {
				if _, err := stream.Append(ctx, a, stream.Batch{Count: 1, Payload: []byte(fmt.Sprint("a", i))}); err != nil {
					t.Fatal(err)
				}
			}
			b, err := s.Open(ctx, "b", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// An append of b's, held at the base: the WAL is busy.
			hold := make(chan struct{})
			var released sync.Once
			release := func() { released.Do(func() { close(hold) }) }
			defer release() // before the Store closes, on a failure too
			base.hold.Store(&hold)
			held := b.Append(ctx, stream.Batch{Count: 1, Payload: []byte("b0")})
			compacted := make(chan error, 1)
			go func() {
				switch tc.run {
				case "behind":
					compacted <- s.compactWith(ctx, passPlan{all: true, backlog: 2 * DefaultCompactBytes})
				case "close":
					compacted <- a.Close()
				default:
					compacted <- s.Compact(ctx)
				}
			}()
			select {
			case err := <-compacted:
				if tc.waits {
					t.Fatalf("the copy ended (%v) with the WAL busy; want it waiting for the WAL to be idle", err)
				}
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(200 * time.Millisecond):
				if !tc.waits {
					t.Fatalf("CompactYield %v, %s: the copy still runs after the WAL was busy for 200 ms", tc.yield, tc.run)
				}
				if n := base.dataAppends.Load(); n != 0 {
					t.Fatalf("%d data appends while the WAL was busy; want the copy waiting", n)
				}
				release() // the WAL goes idle: the copy goes
				if err := <-compacted; err != nil {
					t.Fatal(err)
				}
			}
			if n := base.dataAppends.Load(); n == 0 {
				t.Fatal("nothing copied to a's data stream")
			}
			release()
			if _, err := held.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string][]string{"a": {"a0", "a1", "a2"}, "b": {"b0"}} {
				ro, err := s.Open(ctx, name, stream.OpenOptions{Mode: stream.ModeReadOnly})
				if err != nil {
					t.Fatal(err)
				}
				bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
				ro.Close()
				if err != nil || len(bs) != len(want) {
					t.Fatalf("%s: %d batches, %v; want %d", name, len(bs), err, len(want))
				}
				for i, batch := range bs {
					if string(batch.Payload) != want[i] {
						t.Fatalf("%s at %d: %q, want %q", name, i, batch.Payload, want[i])
					}
				}
			}
		})
	}
}
