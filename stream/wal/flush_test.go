package wal

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// gatedBase holds the first WAL append until gate closes and counts the
// WAL appends.
type gatedBase struct {
	stream.DriverStore
	gate    chan struct{}
	once    sync.Once
	appends atomic.Int64
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
	var open sync.Once
	release := func() { open.Do(func() { close(g.gate) }) }
	defer s.Close()
	defer release() // before Close, which flushes what is queued
	st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	first := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("first")})
	for g.appends.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the first append did not reach the WAL while it was idle (it waits out Linger)")
		}
		time.Sleep(time.Millisecond)
	}
	var rest []*stream.AppendFuture
	for i := range 3 {
		rest = append(rest, st.Append(ctx, stream.Batch{Count: 1, Payload: []byte{byte('0' + i)}}))
	}
	release()
	for i, f := range append([]*stream.AppendFuture{first}, rest...) {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if n := g.appends.Load(); n != 2 {
		t.Fatalf("%d WAL appends for one append and three queued behind it; want 2", n)
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
