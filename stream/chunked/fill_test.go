package chunked

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestAppendFill: a payload written in place (Stream.AppendFill) reads
// back as the bytes fill wrote, between batches Append copied, from the
// writer and from storage; a small batch is left to the caller, a batch
// too large fails before fill runs, and a wrong checksum from fill makes
// the batch read ErrCorrupt, never wrong bytes.
func TestAppendFill(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s, err := NewStore(mem, Options{MaxBatchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "fill", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	fillWith := func(src []byte, sum uint32) func([]byte) uint32 {
		return func(p []byte) uint32 {
			if len(p) != len(src) {
				t.Fatalf("fill got %d bytes of room, want %d", len(p), len(src))
			}
			copy(p, src)
			return sum
		}
	}
	props := map[string]string{"k": "v"}
	f1, ok := st.AppendFill(ctx, stream.Batch{Count: 3, Timestamp: 7, Properties: props}, len(big), fillWith(big, stream.Checksum(big)))
	if !ok {
		t.Fatalf("a %d-byte batch was not written in place", len(big))
	}
	f2 := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("copied")})
	rev := bytes.Clone(big)
	rev[0], rev[len(rev)-1] = 'x', 'y'
	f3, ok := st.AppendFill(ctx, stream.Batch{Count: 2}, len(rev), fillWith(rev, stream.Checksum(rev)))
	if !ok {
		t.Fatal("second fill refused")
	}
	for i, f := range []*stream.AppendFuture{f1, f2, f3} {
		if _, err := f.Result(); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if f, ok := st.AppendFill(ctx, stream.Batch{Count: 1}, 100, func([]byte) uint32 { t.Fatal("fill called for a small batch"); return 0 }); ok || f != nil {
		t.Fatalf("a 100-byte batch: (%v, %v), want (nil, false)", f, ok)
	}
	f, ok := st.AppendFill(ctx, stream.Batch{Count: 1}, 2<<20, func([]byte) uint32 { t.Fatal("fill called for a batch too large"); return 0 })
	if _, err := f.Result(); !ok || !errors.Is(err, stream.ErrBatchTooLarge) {
		t.Fatalf("a batch above MaxBatchBytes: %v %v, want ErrBatchTooLarge", ok, err)
	}
	check := func(from string, s *stream.Stream) {
		t.Helper()
		got, err := s.Fetch(ctx, 0, 6, 0)
		if err != nil || len(got) != 3 {
			t.Fatalf("%s: fetch %d batches, %v", from, len(got), err)
		}
		want := []stream.Batch{{BaseOffset: 0, Count: 3, Timestamp: 7, Payload: big}, {BaseOffset: 3, Count: 1, Payload: []byte("copied")}, {BaseOffset: 4, Count: 2, Payload: rev}}
		for i, w := range want {
			g := got[i]
			if g.BaseOffset != w.BaseOffset || g.Count != w.Count || g.Timestamp != w.Timestamp || !bytes.Equal(g.Payload, w.Payload) {
				t.Fatalf("%s: batch %d is %d+%d at %d (%d bytes), want %d+%d at %d", from, i, g.BaseOffset, g.Count, g.Timestamp, len(g.Payload), w.BaseOffset, w.Count, w.Timestamp)
			}
		}
		if got[0].Properties["k"] != "v" {
			t.Fatalf("%s: properties %v", from, got[0].Properties)
		}
	}
	check("the writer", st)
	// A wrong checksum from fill: stored, and read as ErrCorrupt.
	fb, _ := st.AppendFill(ctx, stream.Batch{Count: 1}, len(big), fillWith(big, stream.Checksum(big)^1))
	r, err := fb.Result()
	stored := err == nil
	if stored {
		if got, err := st.Fetch(ctx, r.BaseOffset, r.NextOffset, 0); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("wrong checksum: fetch from the writer gave %d batches, %v; want ErrCorrupt", len(got), err)
		}
	} else if !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("wrong checksum: append %v, want success or ErrCorrupt", err)
	}
	s2, err := NewStore(mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ro, err := s2.Open(ctx, "fill", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	check("storage", ro)
	if stored {
		if got, err := ro.Fetch(ctx, r.BaseOffset, r.NextOffset, 0); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("wrong checksum: fetch from storage gave %d batches, %v; want ErrCorrupt", len(got), err)
		}
	}
	// A session that does not build batches in place (read-only here)
	// leaves the append to the caller.
	if f, ok := ro.AppendFill(ctx, stream.Batch{Count: 1}, len(big), fillWith(big, 0)); ok || f != nil {
		t.Fatalf("read-only session: (%v, %v), want (nil, false)", f, ok)
	}
}
