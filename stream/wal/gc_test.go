package wal

import (
	"context"
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
	s, err := NewStore(keepBase{base}, Options{SweepInterval: 1 << 40})
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
