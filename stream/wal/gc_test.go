package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// TestCompactionGCAndSweep: a compaction pass copies every tail into its
// data stream and parks idle streams, GC then trims the live WAL to its
// end, and the sweep deletes a dead session's WAL once no record names it
// (and not before).
func TestCompactionGCAndSweep(t *testing.T) {
	ctx := context.Background()
	base := memory.New(memory.Config{})
	dead := crashedWriter(t, base, "a", "b")
	s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{SweepInterval: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// "b" is not opened yet: its last record still names the dead WAL.
	a, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustAppend(t, a, fmt.Sprintf("more-%d", i))
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	wals, _ := base.List(ctx, DefaultPrefix+"/")
	if !slices.Contains(wals, dead) {
		t.Fatalf("the sweep deleted %s while b's record names it (WALs now %v)", dead, wals)
	}
	s.mu.Lock()
	live := s.w
	s.mu.Unlock()
	if live == nil {
		t.Fatal("no live WAL after appends")
	}
	if st, end := live.base.StartOffset(), live.ackedEnd(); st != end {
		t.Fatalf("after compaction with every stream parked the live WAL is trimmed to %d of %d; want its end", st, end)
	}
	// Everything a's log holds is read back from V.data by a fresh reader.
	ro, err := s.Open(ctx, "a", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	ro.Close()
	if err != nil || len(bs) != 23 || string(bs[22].Payload) != "more-19" {
		t.Fatalf("reading a after compaction: %d batches, %v", len(bs), err)
	}
	// Open b: its tail moves off the dead WAL; the next sweep deletes it.
	b, err := s.Open(ctx, "b", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if b.NextOffset() != 3 {
		t.Fatalf("b reopened at %d, want 3", b.NextOffset())
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	wals, _ = base.List(ctx, DefaultPrefix+"/")
	if slices.Contains(wals, dead) {
		t.Fatalf("the dead WAL %s was not deleted once no record names it (WALs %v)", dead, wals)
	}
	if bs, err := b.Fetch(ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != 3 {
		t.Fatalf("b after the sweep: %d batches, %v", len(bs), err)
	}
}

// TestLegacyStreamServedAsIs: a base stream written before stream sets
// (a stream of the very name, no meta stream) is listed, read and
// appended to as it is, read-write and read-only.
func TestLegacyStreamServedAsIs(t *testing.T) {
	ctx := context.Background()
	base := memory.New(memory.Config{})
	old, err := base.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, old, "before")
	old.Close()
	s := newTestStore(t, base)
	if names, err := s.List(ctx, ""); err != nil || !slices.Equal(names, []string{"orders-3/log"}) {
		t.Fatalf("List: %v, %v; want the legacy stream", names, err)
	}
	rw, err := s.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 2, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := mustAppend(t, rw, "after"); r.BaseOffset != 1 {
		t.Fatalf("append to the legacy stream at %d, want 1", r.BaseOffset)
	}
	rw.Close()
	ro, err := s.Open(ctx, "orders-3/log", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 2 || string(bs[0].Payload) != "before" || string(bs[1].Payload) != "after" {
		t.Fatalf("read-only fetch of the legacy stream: %d batches, %v", len(bs), err)
	}
	if err := s.Create(ctx, "orders-3/log"); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatalf("Create over a legacy stream: %v, want ErrAlreadyExists", err)
	}
	if _, err := base.Open(ctx, metaName("orders-3/log"), stream.OpenOptions{Mode: stream.ModeReadOnly}); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("the legacy stream gained a meta stream: %v", err)
	}
}

// TestCleanCloseLeavesNoWAL: a Store closed after all its streams leaves
// no WAL behind (their close records name none); one closed with a stream
// still open keeps the WAL that stream's tail is in, and the next session
// reads the tail back.
func TestCleanCloseLeavesNoWAL(t *testing.T) {
	ctx := context.Background()
	base := memory.New(memory.Config{})
	s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		mustAppend(t, a, fmt.Sprintf("a-%d", i))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if wals, _ := base.List(ctx, DefaultPrefix+"/"); len(wals) != 0 {
		t.Fatalf("WALs left after a clean close: %v", wals)
	}
	s2, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s2.Open(ctx, "b", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, "b-0")
	if err := s2.Close(); err != nil { // b still open: its tail is in the WAL
		t.Fatal(err)
	}
	if wals, _ := base.List(ctx, DefaultPrefix+"/"); len(wals) != 1 {
		t.Fatalf("WALs after a close with b open: %v, want b's", wals)
	}
	s3, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	for name, want := range map[string]int{"a": 5, "b": 1} {
		st, err := s3.Open(ctx, name, stream.OpenOptions{Epoch: 2})
		if err != nil {
			t.Fatal(err)
		}
		if bs, err := st.Fetch(ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != want {
			t.Fatalf("%s after the closes: %d batches, %v; want %d", name, len(bs), err, want)
		}
	}
}
