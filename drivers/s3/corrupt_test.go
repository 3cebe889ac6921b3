package s3

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestCorruptObject: a chunk object altered or truncated in the bucket
// behind the driver is never returned as data; Fetch fails with
// ErrCorrupt, and reads again once the object is restored.
func TestCorruptObject(t *testing.T) {
	ctx := t.Context()
	cfg := minioConfig(t)
	cfg.Engine.CacheBytes = -1 // every fetch reads the bucket
	store, err := Open(ctx, marshalConfig(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	w, err := store.Open(ctx, "corrupt/me", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	payload := []byte("bytes that must never come back altered")
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 3, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	raw := newStorage(t, cfg)
	keys, err := raw.List(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var chunk string
	var orig []byte
	for _, k := range keys {
		if !strings.Contains(k, "/c/") {
			continue
		}
		b, err := raw.Get(ctx, k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > len(orig) { // the data chunk, not the empty fence
			chunk, orig = k, b
		}
	}
	if chunk == "" {
		t.Fatalf("no chunk object among %q", keys)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"payload byte flipped", flip(orig, len(orig)-1)},
		{"header byte flipped", flip(orig, 5)},
		{"truncated", orig[:len(orig)-7]},
		{"emptied", []byte{}},
	} {
		if err := raw.Put(ctx, chunk, c.data); err != nil {
			t.Fatal(err)
		}
		got, err := w.Fetch(ctx, 0, stream.NoEnd, 0)
		if !errors.Is(err, stream.ErrCorrupt) {
			t.Errorf("%s: Fetch of %s = %d batches, %v; want ErrCorrupt", c.name, chunk, len(got), err)
		}
	}
	if err := raw.Put(ctx, chunk, orig); err != nil {
		t.Fatal(err)
	}
	got, err := w.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(got) != 1 || string(got[0].Payload) != string(payload) {
		t.Fatalf("Fetch after restoring %s = %v, %v", chunk, got, err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}
