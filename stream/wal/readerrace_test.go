package wal

import (
	"context"
	"sync"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// hookBase runs hook once, before the first fetch of V.data by a
// read-only session once armed.
type hookBase struct {
	stream.DriverStore
	mu    sync.Mutex
	armed bool
	hook  func()
}

func (b *hookBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := b.DriverStore.Open(ctx, name, o)
	if err != nil || name != dataName("a") || o.Mode != stream.ModeReadOnly {
		return st, err
	}
	return &hookStream{DriverStream: st, b: b}, nil
}

type hookStream struct {
	stream.DriverStream
	b *hookBase
}

func (s *hookStream) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	s.b.mu.Lock()
	hook := s.b.hook
	if !s.b.armed {
		hook = nil
	}
	s.b.armed = false
	s.b.mu.Unlock()
	if hook != nil {
		hook()
	}
	return s.DriverStream.Fetch(ctx, start, end, maxBytes)
}

// TestReaderRacingTheFirstRecord: a read-only session whose refresh read
// V.meta before the stream's first record landed, and V.data after a
// writer's close copied batches there, reads the record again instead of
// decoding V.data without an incarnation (ErrCorrupt).
func TestReaderRacingTheFirstRecord(t *testing.T) {
	ctx := context.Background()
	hb := &hookBase{DriverStore: memory.New(memory.Config{}).Driver()}
	s, err := NewStore(stream.NewStore(keepBase{hb}), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A writer that appended nothing: V.data exists, V.meta holds no
	// record.
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
	ro, err := s.Open(ctx, "a", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	hb.mu.Lock()
	hb.armed = true
	hb.hook = func() {
		w, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 2})
		if err != nil {
			t.Error(err)
			return
		}
		mustAppend(t, w, "first")
		if err := w.Close(); err != nil { // copies the tail to V.data
			t.Error(err)
		}
	}
	hb.mu.Unlock()
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil {
		t.Fatalf("fetch racing the first record: %v", err)
	}
	if len(bs) > 0 && string(bs[0].Payload) != "first" {
		t.Fatalf("fetch racing the first record: %q", bs[0].Payload)
	}
	if bs, err = ro.Fetch(ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != 1 || string(bs[0].Payload) != "first" {
		t.Fatalf("fetch after the first record: %d batches, %v", len(bs), err)
	}
}
