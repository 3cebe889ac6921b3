package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// sharedSession opens streams x and y in store a, one record each, and
// returns another store b on the same base.
func sharedSession(t *testing.T) (base *stream.Store, a, b *Store, x, y stream.DriverStream) {
	t.Helper()
	ctx := context.Background()
	base = memory.New(memory.Config{})
	a, b = newTestStore(t, base), newTestStore(t, base)
	var err error
	if x, err = a.Open(ctx, "x", stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
		t.Fatal(err)
	}
	if y, err = a.Open(ctx, "y", stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, x, "x1")
	mustAppend(t, y, "y1")
	return base, a, b, x, y
}

// TestTakeoverOfOneStreamSparesTheOthers: another store taking one
// stream over (a partition moved to another broker) fences the WAL that
// stream shares with the session's other streams (W3); those streams
// settle and go on, on a new WAL: none of their appends fails, not even the
// ones in flight at the fence, and only the moved stream is fenced.
func TestTakeoverOfOneStreamSparesTheOthers(t *testing.T) {
	ctx := context.Background()
	_, a, b, x, y := sharedSession(t)
	var fs []*stream.AppendFuture
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			fs = append(fs, y.Append(ctx, stream.Batch{Count: 1, Payload: []byte("y-in-flight")}))
		}
	}()
	bx, err := b.Open(ctx, "x", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer bx.Close()
	<-done
	for i, f := range fs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("append %d to y, in flight while x moved: %v", i, err)
		}
	}
	mustAppend(t, y, "y after")
	a.mu.Lock()
	wals := a.walSeq
	a.mu.Unlock()
	if wals < 2 {
		t.Fatalf("the session used %d WAL: the takeover did not fence the one x shared with y", wals)
	}
	if _, err := stream.Append(ctx, x, stream.Batch{Count: 1, Payload: []byte("x2")}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("append to x after it moved: %v; want ErrFenced", err)
	}
	if got := bx.NextOffset(); got != 1 {
		t.Fatalf("the new owner of x sees %d offsets, want 1", got)
	}
	if got := y.NextOffset(); got != 2002 {
		t.Fatalf("y ends at %d, want 2002", got)
	}
}

// TestSettleAdmitsNoAppendBeforeItsRetries: a stream settling after
// another store fenced its WAL appends the entries it took back again at
// their offsets; an append that arrives meanwhile must queue behind them.
// One that arrived after the settle had taken the ended WAL over, but
// before those entries were queued again, took the offset of the first
// of them: both were acknowledged at one offset, and a new owner, which
// takes the WAL's entries only while they continue its log (W4), lost
// every acknowledged entry from the second on. Each acknowledged append
// must be read back by a new owner at its offsets, with its bytes.
func TestSettleAdmitsNoAppendBeforeItsRetries(t *testing.T) {
	ctx := context.Background()
	base, _, b, _, y := sharedSession(t)
	type sent struct {
		payload string
		f       *stream.AppendFuture
	}
	var mu sync.Mutex
	var all []sent
	appendY := func(p string) {
		f := y.Append(ctx, stream.Batch{Count: 1, Payload: []byte(p)})
		mu.Lock()
		all = append(all, sent{p, f})
		mu.Unlock()
	}
	var windows atomic.Int64
	defer func() { settleHook = nil }()
	settleHook = func(h *vstream) {
		if h.name != "y" {
			return
		}
		// An append arriving while the settle is between taking the
		// ended WAL over and queueing its taken-back entries.
		n := windows.Add(1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			appendY(fmt.Sprint("y-window-", n))
		}()
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond): // it waits for the settle: right
		}
	}
	stop := make(chan struct{})
	flying := make(chan struct{})
	go func() {
		defer close(flying)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			appendY(fmt.Sprint("y-", i))
			if i%64 == 63 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	bx, err := b.Open(ctx, "x", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer bx.Close()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-flying
	if windows.Load() == 0 {
		t.Fatal("y never settled: the takeover of x did not end the WAL y's appends were in")
	}
	mu.Lock()
	defer mu.Unlock()
	at := map[int64]string{}
	for _, s := range all {
		r, err := s.f.Wait(ctx)
		if err != nil {
			continue // failed: may or may not be in the log
		}
		if p, ok := at[r.BaseOffset]; ok {
			t.Fatalf("%s and %s both acknowledged at offset %d", p, s.payload, r.BaseOffset)
		}
		at[r.BaseOffset] = s.payload
	}
	// A new owner of y reads every acknowledged append where it was
	// acknowledged.
	c := newTestStore(t, base)
	cy, err := c.Open(ctx, "y", stream.OpenOptions{Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cy.Close()
	bs, err := cy.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, bt := range bs {
		got[bt.BaseOffset] = string(bt.Payload)
	}
	for off, p := range at {
		if got[off] != p {
			t.Fatalf("acknowledged %s at offset %d; the new owner reads %q there (log of %d batches)", p, off, got[off], len(bs))
		}
	}
	t.Logf("%d appends to y acknowledged, %d settles of y, all read back by the new owner", len(at), windows.Load())
}
