package wal

import (
	"context"
	"sync"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// hookBase runs hook once, right after a read-only open of one of V a's
// data streams returns, once armed (the open's result stands).
type hookBase struct {
	stream.DriverStore
	mu    sync.Mutex
	armed bool
	hook  func()
}

func (b *hookBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := b.DriverStore.Open(ctx, name, o)
	if !isDataOf(name, "a") || o.Mode != stream.ModeReadOnly {
		return st, err
	}
	b.mu.Lock()
	hook := b.hook
	if !b.armed {
		hook = nil
	}
	b.armed = false
	b.mu.Unlock()
	if hook != nil {
		hook()
	}
	return st, err
}

// TestReaderRacingTheFirstCopy: a new incarnation creates its V.data at
// its first copy. A read-only session that read the record of the
// stream's first claim and found no V.data yet, while the writer's close
// created it, copied the tail there and let GC trim the WAL, serves the
// batch (from the WAL or, reading again, from V.data), never an error.
func TestReaderRacingTheFirstCopy(t *testing.T) {
	ctx := context.Background()
	hb := &hookBase{DriverStore: memory.New(memory.Config{}).Driver()}
	s, err := NewStore(stream.NewStore(keepBase{hb}), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Opened and closed with no append: no record, no data stream.
	w, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := s.peekRecord(ctx, "a"); err != nil || ok {
		t.Fatalf("V.meta after an open and a close with no append: %+v, %v, %v; want no record", rec, ok, err)
	}
	for _, n := range baseNames(t, hb.DriverStore) {
		if isDataOf(n, "a") {
			t.Fatalf("data stream %q of a stream that never appended", n)
		}
	}
	ro, err := s.Open(ctx, "a", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != 0 {
		t.Fatalf("fetch of a stream with no record: %d batches, %v; want none", len(bs), err)
	}
	w, err = s.Open(ctx, "a", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, w, "first") // claims: a record, the batch in the WAL
	hb.mu.Lock()
	hb.armed = true
	hb.hook = func() {
		if err := w.Close(); err != nil { // creates V.data, copies, GC
			t.Error(err)
		}
		if err := s.Compact(ctx); err != nil {
			t.Error(err)
		}
	}
	hb.mu.Unlock()
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || string(bs[0].Payload) != "first" {
		t.Fatalf("fetch racing the first copy: %d batches, %v", len(bs), err)
	}
	hb.mu.Lock()
	fired := !hb.armed
	hb.mu.Unlock()
	if !fired {
		t.Fatal("the race was not staged: the reader never opened V.data")
	}
	if bs, err = ro.Fetch(ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != 1 || string(bs[0].Payload) != "first" {
		t.Fatalf("fetch after the first copy: %d batches, %v", len(bs), err)
	}
}
