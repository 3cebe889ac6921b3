package wal

import (
	"context"
	"errors"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// TestTakeoverOfOneStreamSparesTheOthers: another store taking one
// stream over (a partition moved to another broker) fences the WAL that
// stream shares with the session's other streams (W3); those streams
// settle and go on, on a new WAL: none of their appends fails, not even the
// ones in flight at the fence, and only the moved stream is fenced.
func TestTakeoverOfOneStreamSparesTheOthers(t *testing.T) {
	ctx := context.Background()
	base := memory.New(memory.Config{})
	a := newTestStore(t, base)
	b := newTestStore(t, base)
	x, err := a.Open(ctx, "x", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Open(ctx, "y", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, x, "x1")
	mustAppend(t, y, "y1")
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
