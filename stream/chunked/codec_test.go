package chunked

import (
	"bytes"
	"errors"
	"reflect"
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
	f.Add(encodeManifest(pagedManifest()))
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

// pagedManifest names two index pages (slots 1-4 and 5-9, offsets 0-10
// and 10-30) and then one entry of its own.
func pagedManifest() *manifest {
	return &manifest{Kind: manTrim, Owner: sessionKey{2, 5}, Start: 3, IdxEnd: 12, IdxNext: 33,
		Pages: []pageRef{{ID: putID{1}, First: 1, End: 4, Base: 0, Next: 10, N: 3}, {ID: putID{2}, First: 5, End: 9, Base: 10, Next: 30, N: 2}},
		Index: []indexEntry{{Seq: 10, Base: 30, Count: 3}}}
}

func TestPagedManifestRoundTrip(t *testing.T) {
	m := pagedManifest()
	got, err := decodeManifest(encodeManifest(m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v, encoded %+v", got, m)
	}
	// Pages out of order, a gap in offsets, or a first page below the
	// start: ErrCorrupt.
	for _, bad := range []func(m *manifest){
		func(m *manifest) { m.Pages[1].Base = 11 },
		func(m *manifest) { m.Pages[0], m.Pages[1] = m.Pages[1], m.Pages[0] },
		func(m *manifest) { m.Start = 10 },
		func(m *manifest) { m.Index[0].Seq = 8 },
		func(m *manifest) { m.Pages[1].End = 13 },
	} {
		m := pagedManifest()
		bad(m)
		if _, err := decodeManifest(encodeManifest(m)); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("manifest %+v: %v, want ErrCorrupt", m, err)
		}
	}
	p := m.Pages[1]
	es := []indexEntry{{Seq: 5, Base: 10, Count: 4}, {Seq: 8, Base: 14, Count: 16}}
	back, err := decodePage(encodePage(p, es), p)
	if err != nil || !reflect.DeepEqual(back, es) {
		t.Fatalf("page: %v, %+v", err, back)
	}
	other := p
	other.ID = putID{9}
	if _, err := decodePage(encodePage(p, es), other); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("a page read for another id: %v, want ErrCorrupt", err)
	}
	if _, err := decodePage(encodePage(p, es[:1]), p); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("a page with fewer entries than named: %v, want ErrCorrupt", err)
	}
}

func FuzzDecodePage(f *testing.F) {
	p := pagedManifest().Pages[1]
	f.Add(encodePage(p, []indexEntry{{Seq: 5, Base: 10, Count: 4}, {Seq: 8, Base: 14, Count: 16}}), p.First, p.End, p.Base, p.Next, p.N)
	f.Fuzz(func(t *testing.T, b []byte, first, end uint64, base, next int64, n uint32) {
		p := pageRef{First: first, End: end, Base: base, Next: next, N: n}
		if len(b) >= 19 {
			p.ID = putID(b[3:19])
		}
		es, err := decodePage(b, p)
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(encodePage(p, es), b) {
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
