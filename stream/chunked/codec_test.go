package chunked

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stratastream/strata/stream"
)

func sampleBatches() []stream.Batch {
	return []stream.Batch{
		{BaseOffset: 10, Count: 2, Timestamp: 1700000000000, Properties: map[string]string{"b": "2", "a": "1"}, Payload: []byte("hello")},
		{BaseOffset: 12, Count: 1, Timestamp: -5, Payload: []byte{}},
		{BaseOffset: 13, Count: 7, Payload: bytes.Repeat([]byte{0xab}, 300)},
	}
}

func TestChunkRoundTrip(t *testing.T) {
	id := putID{1, 2, 3}
	sess := sessionKey{Epoch: 7, Session: 3}
	data := encodeChunk(chunkData, sess, 10, id, sampleBatches())
	h, bs, err := decodeChunk(data)
	if err != nil {
		t.Fatal(err)
	}
	if h.Sess != sess || h.Base != 10 || h.Count != 10 || h.PutID != id || h.Batches != 3 {
		t.Fatalf("header %+v", h)
	}
	for i, want := range sampleBatches() {
		got := bs[i]
		if got.BaseOffset != want.BaseOffset || got.Count != want.Count || got.Timestamp != want.Timestamp ||
			!bytes.Equal(got.Payload, want.Payload) || len(got.Properties) != len(want.Properties) {
			t.Fatalf("batch %d: %+v, want %+v", i, got, want)
		}
		for k, v := range want.Properties {
			if got.Properties[k] != v {
				t.Fatalf("batch %d property %q: %q", i, k, got.Properties[k])
			}
		}
	}
	// Every single flipped byte is caught.
	for i := range data {
		c := bytes.Clone(data)
		c[i] ^= 0x40
		if _, _, err := decodeChunk(c); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	for n := range data {
		if _, _, err := decodeChunk(data[:n]); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	fence := encodeChunk(chunkFence, sess, 99, id, nil)
	if h, bs, err := decodeChunk(fence); err != nil || h.Kind != chunkFence || h.Base != 99 || len(bs) != 0 {
		t.Fatalf("fence: %+v %v %v", h, bs, err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := &manifest{Kind: manTrim, Owner: sessionKey{3, 4}, PutID: putID{9}, Start: 5, IdxEnd: 9, IdxNext: 20,
		IdxSess: sessionKey{3, 4}, Index: []indexEntry{{Seq: 2, Base: 4, Count: 6, PutID: putID{1}}, {Seq: 5, Base: 10, Count: 10}}}
	b := encodeManifest(m)
	got, err := decodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != m.Kind || got.Owner != m.Owner || got.Start != 5 || got.IdxEnd != 9 || got.IdxNext != 20 || len(got.Index) != 2 || got.Index[1] != m.Index[1] {
		t.Fatalf("got %+v", got)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, err := decodeManifest(c); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	g := generation{Kind: genLive, Inc: "ABC123"}
	if got, err := decodeGeneration(encodeGeneration(g)); err != nil || got != g {
		t.Fatalf("generation %+v %v", got, err)
	}
	if v, err := decodeHint(encodeHint(42)); err != nil || v != 42 {
		t.Fatalf("hint %d %v", v, err)
	}
}

// The decoders read bytes from outside (any backend object): they must
// never panic, and anything they accept must re-encode to the same bytes.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(encodeChunk(chunkData, sessionKey{1, 1}, 10, putID{1}, sampleBatches()))
	f.Add(encodeChunk(chunkFence, sessionKey{2, 5}, 0, putID{2}, nil))
	f.Add([]byte("SC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, bs, err := decodeChunk(b)
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := encodeChunk(h.Kind, h.Sess, h.Base, h.PutID, bs); !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes do not re-encode the same")
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(encodeManifest(&manifest{Kind: manOpen, Owner: sessionKey{1, 1}, IdxEnd: 3, IdxNext: 7,
		Index: []indexEntry{{Seq: 1, Base: 0, Count: 7}}}))
	f.Add(encodeManifest(&manifest{Kind: manCreate}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := encodeManifest(m); !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes do not re-encode the same")
		}
	})
}

func FuzzDecodeGenerationAndHint(f *testing.F) {
	f.Add(encodeGeneration(generation{Kind: genLive, Inc: "X1"}))
	f.Add(encodeGeneration(generation{Kind: genTombstone}))
	f.Add(encodeHint(7))
	f.Fuzz(func(t *testing.T, b []byte) {
		if g, err := decodeGeneration(b); err == nil {
			if !bytes.Equal(encodeGeneration(g), b) {
				t.Fatalf("generation does not re-encode the same")
			}
		} else if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		if v, err := decodeHint(b); err == nil {
			if !bytes.Equal(encodeHint(v), b) {
				t.Fatalf("hint does not re-encode the same")
			}
		} else if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	})
}
