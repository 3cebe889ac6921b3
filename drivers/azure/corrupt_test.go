package azure

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestCorruptBlob: a chunk blob altered or truncated in the container is
// never returned as data: Fetch (with no cache) gets ErrCorrupt; put back,
// it reads again.
func TestCorruptBlob(t *testing.T) {
	ctx := t.Context()
	cfg := freshConfig(t)
	cfg.Engine.CacheBytes = -1
	config := marshal(t, cfg)
	store, err := Open(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	w, err := store.Open(ctx, "c", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	payload := []byte("the payload that must not come back altered")
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	raw, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	keys, err := raw.List(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var chunk string
	for _, k := range keys {
		if strings.Contains(k, "/c/") {
			chunk = k // the last chunk: the data chunk after the fence
		}
	}
	if chunk == "" {
		t.Fatalf("no chunk blob among %q", keys)
	}
	orig, err := raw.Get(ctx, chunk, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	// Flip the last payload byte: the CRC must catch it.
	bad := append([]byte(nil), orig...)
	bad[len(bad)-1] ^= 0x40
	if err := raw.Put(ctx, chunk, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Fetch(ctx, 0, stream.NoEnd, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("Fetch of chunk %s with a flipped byte = %v, want ErrCorrupt", chunk, err)
	}
	// Truncated blob: also corrupt, never a short batch.
	if err := raw.Put(ctx, chunk, orig[:len(orig)-5]); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Fetch(ctx, 0, stream.NoEnd, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("Fetch of truncated chunk %s = %d batches, %v; want ErrCorrupt", chunk, len(got), err)
	}
	// Restored: readable again.
	if err := raw.Put(ctx, chunk, orig); err != nil {
		t.Fatal(err)
	}
	got, err := w.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(got) != 1 || string(got[0].Payload) != string(payload) {
		t.Fatalf("Fetch after restoring %s = %v, %v", chunk, got, err)
	}
}
