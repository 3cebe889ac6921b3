package chunked

import (
	"bytes"
	"encoding/binary"
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
	data := encodeChunk(testSeed, chunkData, sess, 10, id, sampleBatches())
	h, bs, err := decodeChunk(data, testSeed)
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
		if _, _, err := decodeChunk(c, testSeed); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	for n := range data {
		if _, _, err := decodeChunk(data[:n], testSeed); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	fence := encodeChunk(testSeed, chunkFence, sess, 99, id, nil)
	if h, bs, err := decodeChunk(fence, testSeed); err != nil || h.Kind != chunkFence || h.Base != 99 || len(bs) != 0 {
		t.Fatalf("fence: %+v %v %v", h, bs, err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := &manifest{Kind: manTrim, Owner: sessionKey{3, 4}, PutID: putID{9}, Start: 5, IdxEnd: 9, IdxNext: 20,
		IdxSess: sessionKey{3, 4}, Index: []indexEntry{{Seq: 2, Base: 4, Count: 6, PutID: putID{1}}, {Seq: 5, Base: 10, Count: 10}}}
	b := encodeManifest(m, testSeed)
	got, err := decodeManifest(b, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != m.Kind || got.Owner != m.Owner || got.Start != 5 || got.IdxEnd != 9 || got.IdxNext != 20 || len(got.Index) != 2 || got.Index[1] != m.Index[1] {
		t.Fatalf("got %+v", got)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, err := decodeManifest(c, testSeed); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	g := generation{Kind: genLive, Inc: "ABC123"}
	if got, err := decodeGeneration(encodeGeneration(g, testSeed), testSeed); err != nil || got != g {
		t.Fatalf("generation %+v %v", got, err)
	}
	if v, err := decodeHint(encodeHint(42, testSeed), testSeed); err != nil || v != 42 {
		t.Fatalf("hint %d %v", v, err)
	}
}

// The decoders read bytes from outside (any backend object): they must
// never panic, and anything they accept must re-encode to the same bytes.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(encodeChunk(testSeed, chunkData, sessionKey{1, 1}, 10, putID{1}, sampleBatches()))
	f.Add(encodeChunk(testSeed, chunkFence, sessionKey{2, 5}, 0, putID{2}, nil))
	f.Add([]byte("SC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, bs, err := decodeChunk(b, testSeed)
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := encodeChunk(testSeed, h.Kind, h.Sess, h.Base, h.PutID, bs); !bytes.Equal(sameFormat(again, b), b) {
			t.Fatalf("accepted bytes do not re-encode the same")
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(encodeManifest(&manifest{Kind: manOpen, Owner: sessionKey{1, 1}, IdxEnd: 3, IdxNext: 7,
		Index: []indexEntry{{Seq: 1, Base: 0, Count: 7}}}, testSeed))
	f.Add(encodeManifest(&manifest{Kind: manCreate}, testSeed))
	f.Add(encodeManifest(pagedManifest(), testSeed))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b, testSeed)
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := encodeManifest(m, testSeed); !bytes.Equal(sameFormat(again, b), b) {
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
	got, err := decodeManifest(encodeManifest(m, testSeed), testSeed)
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
		if _, err := decodeManifest(encodeManifest(m, testSeed), testSeed); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("manifest %+v: %v, want ErrCorrupt", m, err)
		}
	}
	p := m.Pages[1]
	es := []indexEntry{{Seq: 5, Base: 10, Count: 4}, {Seq: 8, Base: 14, Count: 16}}
	back, err := decodePage(encodePage(p, es, testSeed), p, testSeed)
	if err != nil || !reflect.DeepEqual(back, es) {
		t.Fatalf("page: %v, %+v", err, back)
	}
	other := p
	other.ID = putID{9}
	if _, err := decodePage(encodePage(p, es, testSeed), other, testSeed); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("a page read for another id: %v, want ErrCorrupt", err)
	}
	if _, err := decodePage(encodePage(p, es[:1], testSeed), p, testSeed); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("a page with fewer entries than named: %v, want ErrCorrupt", err)
	}
}

func FuzzDecodePage(f *testing.F) {
	p := pagedManifest().Pages[1]
	f.Add(encodePage(p, []indexEntry{{Seq: 5, Base: 10, Count: 4}, {Seq: 8, Base: 14, Count: 16}}, testSeed), p.First, p.End, p.Base, p.Next, p.N)
	f.Fuzz(func(t *testing.T, b []byte, first, end uint64, base, next int64, n uint32) {
		p := pageRef{First: first, End: end, Base: base, Next: next, N: n}
		if len(b) >= 19 {
			p.ID = putID(b[3:19])
		}
		es, err := decodePage(b, p, testSeed)
		if err != nil {
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(encodePage(p, es, testSeed), b) {
			t.Fatalf("accepted bytes do not re-encode the same")
		}
	})
}

func FuzzDecodeGenerationAndHint(f *testing.F) {
	f.Add(encodeGeneration(generation{Kind: genLive, Inc: "X1"}, testSeed))
	f.Add(encodeGeneration(generation{Kind: genTombstone}, testSeed))
	f.Add(encodeHint(7, testSeed))
	f.Fuzz(func(t *testing.T, b []byte) {
		if g, err := decodeGeneration(b, testSeed); err == nil {
			if !bytes.Equal(sameFormat(encodeGeneration(g, testSeed), b), b) {
				t.Fatalf("generation does not re-encode the same")
			}
		} else if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		if v, err := decodeHint(b, testSeed); err == nil {
			if !bytes.Equal(sameFormat(encodeHint(v, testSeed), b), b) {
				t.Fatalf("hint does not re-encode the same")
			}
		} else if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	})
}

// testSeed is the identity seed of the codec tests' objects.
var testSeed = newLayout("codec/test", "INC1").seed

// asLegacy is object b (as the engine writes it) in the format written
// before checksums were bound (boundFlag clear, checksums unseeded).
func asLegacy(b []byte) []byte {
	b = bytes.Clone(b)
	b[2] &^= boundFlag
	if b[0] == magicChunk[0] && b[1] == magicChunk[1] {
		binary.BigEndian.PutUint32(b[64:], stream.Checksum(b[:64]))
		return b
	}
	binary.BigEndian.PutUint32(b[len(b)-4:], stream.Checksum(b[:len(b)-4]))
	return b
}

// sameFormat is again (an encoding) in the format of like: legacy when
// like is.
func sameFormat(again, like []byte) []byte {
	if len(like) > 2 && like[2]&boundFlag == 0 {
		return asLegacy(again)
	}
	return again
}
