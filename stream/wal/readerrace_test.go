package wal

import (
	"context"
	"sync"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// openHook runs an armed hook once, right after the first Open that match
// accepts returns (the open's result stands).
type openHook struct {
	stream.DriverStore
	match func(name string, o stream.OpenOptions, err error) bool
	mu    sync.Mutex
	hook  func()
}

// arm sets the hook the next matching Open runs.
func (b *openHook) arm(hook func()) {
	b.mu.Lock()
	b.hook = hook
	b.mu.Unlock()
}

// fired says the armed hook ran.
func (b *openHook) fired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hook == nil
}

func (b *openHook) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := b.DriverStore.Open(ctx, name, o)
	if !b.match(name, o, err) {
		return st, err
	}
	b.mu.Lock()
	hook := b.hook
	b.hook = nil
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
	// The hook runs after a read-only open of a's data stream.
	hb := &openHook{DriverStore: memory.New(memory.Config{}).Driver(), match: func(name string, o stream.OpenOptions, _ error) bool {
		return isDataOf(name, "a") && o.Mode == stream.ModeReadOnly
	}}
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
	hb.arm(func() {
		if err := w.Close(); err != nil { // creates V.data, copies, GC
			t.Error(err)
		}
		if err := s.Compact(ctx); err != nil {
			t.Error(err)
		}
	})
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || string(bs[0].Payload) != "first" {
		t.Fatalf("fetch racing the first copy: %d batches, %v", len(bs), err)
	}
	if !hb.fired() {
		t.Fatal("the race was not staged: the reader never opened V.data")
	}
	if bs, err = ro.Fetch(ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != 1 || string(bs[0].Payload) != "first" {
		t.Fatalf("fetch after the first copy: %d batches, %v", len(bs), err)
	}
}
