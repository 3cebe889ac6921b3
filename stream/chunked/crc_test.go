package chunked

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stratastream/strata/stream"
)

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 4, 8, 100, 4095, 65536, 1<<20 + 7} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		for _, cut := range []int{0, n / 3, n} {
			a, c := b[:cut], b[cut:]
			if got, want := crcCombine(stream.Checksum(a), stream.Checksum(c), len(c)), stream.Checksum(b); got != want {
				t.Fatalf("len %d cut %d: combine %08x, want %08x", n, cut, got, want)
			}
		}
	}
}

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
			BodyLen: uint32(len(buf) - chunkHeaderLen), BodyCRC: stream.Checksum(buf[chunkHeaderLen:]), PutID: putID{5}})
		want = buf
	}
	got := encodeChunk(chunkData, sessionKey{1, 2}, 10, putID{5}, bs)
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeChunk differs from the one-pass reference encoding")
	}
	h, dec, err := decodeChunk(got)
	if err != nil || h.Count != uint64(base-10) || len(dec) != len(bs) || !bytes.Equal(dec[3].Payload, bs[3].Payload) {
		t.Fatalf("decode: %+v %d %v", h, len(dec), err)
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
