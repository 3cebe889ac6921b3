package chunked

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stratastream/strata/stream"
)

// TestSealChunkMatchesEncoder: the append path's in-place encoding (body
// written at Append, offsets and checksums at the cut, combined for large
// batches) gives the very bytes of encodeChunk's straightforward one.
func TestSealChunkMatchesEncoder(t *testing.T) {
	bs := append(sampleBatches(), stream.Batch{Count: 3, Timestamp: 9, Properties: map[string]string{"k": "v"}, Payload: bytes.Repeat([]byte{7, 1}, 70000)},
		stream.Batch{Count: 1, Payload: bytes.Repeat([]byte{3}, combineMin)})
	base := int64(10)
	for i := range bs {
		bs[i].BaseOffset = base
		base += int64(bs[i].Count)
	}
	var want []byte
	{
		// The reference: every batch checksummed in one pass, as decoders do.
		buf := make([]byte, chunkHeaderLen)
		for _, b := range bs {
			start := len(buf)
			buf = append(buf, make([]byte, batchEncodedLen(b))...)
			encodeBatchBody(buf[start:], b)
			e := buf[start:]
			copy(e, []byte{0, 0, 0, 0, 0, 0, 0, byte(b.BaseOffset)})
			copy(e[len(e)-4:], be32(stream.Checksum(e[:len(e)-4])))
		}
		putChunkHeader(buf, chunkHeader{Kind: chunkData, Sess: sessionKey{1, 2}, Base: 10, Count: uint64(base - 10), Batches: uint32(len(bs)),
			BodyLen: uint32(len(buf) - chunkHeaderLen), BodyCRC: stream.Checksum(buf[chunkHeaderLen:]), PutID: putID{5}}, testSeed)
		want = buf
	}
	got := encodeChunk(testSeed, chunkData, sessionKey{1, 2}, 10, putID{5}, bs)
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeChunk differs from the one-pass reference encoding")
	}
	h, dec, err := decodeChunk(got, testSeed)
	if err != nil || h.Count != uint64(base-10) || len(dec) != len(bs) || !bytes.Equal(dec[3].Payload, bs[3].Payload) {
		t.Fatalf("decode: %+v %d %v", h, len(dec), err)
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// TestSuppliedChecksumEncoding: a payload checksum the caller supplied
// gives the very bytes of the engine's own when it is right, and a chunk
// that fails to decode (never the payload) when it is wrong.
func TestSuppliedChecksumEncoding(t *testing.T) {
	big := bytes.Repeat([]byte{5, 6, 7}, 30000)
	bs := append(sampleBatches(), stream.Batch{Count: 2, Properties: map[string]string{"p": "q"}, Payload: big})
	want := encodeChunk(testSeed, chunkData, sessionKey{1, 2}, 10, putID{5}, bs)
	withSums := func(wrong bool) []stream.Batch {
		out := slices.Clone(bs)
		for i := range out {
			out[i].PayloadChecksum, out[i].PayloadChecksumSet = stream.Checksum(out[i].Payload), true
			if wrong && len(out[i].Payload) >= combineMin {
				out[i].PayloadChecksum ^= 0x100
			}
		}
		return out
	}
	if got := encodeChunk(testSeed, chunkData, sessionKey{1, 2}, 10, putID{5}, withSums(false)); !bytes.Equal(got, want) {
		t.Fatalf("a right supplied checksum changed the encoding")
	}
	bad := encodeChunk(testSeed, chunkData, sessionKey{1, 2}, 10, putID{5}, withSums(true))
	if _, _, err := decodeChunk(bad, testSeed); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("decode of a chunk stored with a wrong supplied checksum: %v, want ErrCorrupt", err)
	}
}

// TestSuppliedChecksumEngine: through the engine, a wrong supplied
// checksum fails the Append (small batches, checked at once) or every
// Fetch of the batch, from the writer's cache and from storage alike; a
// right one round-trips.
func TestSuppliedChecksumEngine(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s, err := NewStore(mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "sums", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	small := []byte("a small payload")
	if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: small, PayloadChecksum: stream.Checksum(small) + 1, PayloadChecksumSet: true}).Result(); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("small batch, wrong checksum: append %v, want ErrCorrupt", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	good := stream.Batch{Count: 3, Payload: big, PayloadChecksum: stream.Checksum(big), PayloadChecksumSet: true}
	if r, err := st.Append(ctx, good).Result(); err != nil || r.BaseOffset != 0 {
		t.Fatalf("right checksum: append %+v %v", r, err)
	}
	got, err := st.Fetch(ctx, 0, 3, 0)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Payload, big) || got[0].PayloadChecksumSet {
		t.Fatalf("right checksum: fetch %d batches, %v", len(got), err)
	}
	wrong := good
	wrong.PayloadChecksum ^= 1
	r, err := st.Append(ctx, wrong).Result()
	if err != nil {
		if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("wrong checksum: append %v, want success or ErrCorrupt", err)
		}
		return
	}
	if got, err := st.Fetch(ctx, r.BaseOffset, r.NextOffset, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("wrong checksum: fetch from the writer gave %d batches, %v; want ErrCorrupt", len(got), err)
	}
	s2, err := NewStore(mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ro, err := s2.Open(ctx, "sums", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ro.Fetch(ctx, r.BaseOffset, r.NextOffset, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("wrong checksum: fetch from storage gave %d batches, %v; want ErrCorrupt", len(got), err)
	}
}
