package chunked

import (
	"bytes"
	"context"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestClosedLoopAppendRequests: an append alone (linger 0, nothing else in
// flight) costs its chunk put and one ack probe of the next manifest (R3),
// and no other Storage request: no header read, no hint, no manifest put.
func TestClosedLoopAppendRequests(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s := newTestStore(t, mem, Options{})
	w := mustOpen(t, s, "lat", 1)
	before := mem.RequestStats()
	const n = 20
	for i := range n {
		if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	after := mem.RequestStats()
	if puts, gets := after.Puts-before.Puts, after.Gets-before.Gets; puts != n || gets != n || after.Lists != before.Lists || after.Deletes != before.Deletes {
		t.Fatalf("%d closed-loop appends: %d puts, %d gets, %d lists, %d deletes; want %d puts and %d gets only",
			n, puts, gets, after.Lists-before.Lists, after.Deletes-before.Deletes, n, n)
	}
}

// TestAppendCopiesBatch: Append takes its own copy, so the caller may reuse
// the payload and properties at once; pipelined appends of one reused
// buffer read back as they were when each Append returned, from the cache
// and from the Storage alike.
func TestAppendCopiesBatch(t *testing.T) {
	ctx := context.Background()
	for _, cache := range []int64{0, -1} {
		mem := NewMemStorage()
		s := newTestStore(t, mem, Options{CacheBytes: cache, MaxChunkBytes: 64 << 10})
		w := mustOpen(t, s, "reuse", 1)
		buf := make([]byte, 20<<10)
		props := map[string]string{"k": "v0"}
		var fs []*stream.AppendFuture
		for i := range 40 {
			for j := range buf {
				buf[j] = byte(i)
			}
			props["k"] = string(rune('a' + i))
			fs = append(fs, w.Append(ctx, stream.Batch{Count: 1, Properties: props, Payload: buf}))
		}
		for _, f := range fs {
			if _, err := f.Result(); err != nil {
				t.Fatal(err)
			}
		}
		got := fetchAll(t, w, 0)
		if len(got) != 40 {
			t.Fatalf("cache %d: %d batches, want 40", cache, len(got))
		}
		for i, b := range got {
			if !bytes.Equal(b.Payload, bytes.Repeat([]byte{byte(i)}, len(buf))) || b.Properties["k"] != string(rune('a'+i)) {
				t.Fatalf("cache %d: batch %d holds %d..., props %v", cache, i, b.Payload[0], b.Properties)
			}
		}
	}
}
