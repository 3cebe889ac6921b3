package stream_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratastream/strata/stream"
)

func TestCombineChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 4, 8, 21, 100, 4095, 65536, 1<<20 + 7} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		for _, cut := range []int{0, 1, n / 3, n - 1, n} {
			cut = max(0, min(cut, n))
			a, c := b[:cut], b[cut:]
			if got, want := stream.CombineChecksum(stream.Checksum(a), stream.Checksum(c), len(c)), stream.Checksum(b); got != want {
				t.Fatalf("len %d cut %d: combine %08x, want %08x", n, cut, got, want)
			}
			if got, want := stream.UpdateChecksum(stream.Checksum(a), c), stream.Checksum(b); got != want {
				t.Fatalf("len %d cut %d: update %08x, want %08x", n, cut, got, want)
			}
		}
	}
	if got := stream.CombineChecksum(0x12345678, 0x9abcdef0, -5); got != 0x12345678^0x9abcdef0 {
		t.Fatalf("negative length: %08x, want the xor of the two", got)
	}
}

func BenchmarkCombineChecksum(b *testing.B) {
	for b.Loop() {
		stream.CombineChecksum(0x12345678, 0x9abcdef0, 1<<20-21)
	}
}

// TestCombineChecksumLongShifts checks shifts too long to test with data
// (up to 2^24 bytes and beyond, and past 2^32, which takes another path)
// against a composition of shorter ones: shifting over n1+n2 bytes is
// shifting over n1, then over n2.
func TestCombineChecksumLongShifts(t *testing.T) {
	const crc = 0x12345678
	for _, n := range [][2]int{{1 << 20, 1 << 20}, {1<<24 - 1, 3}, {1<<31 + 5, 1<<30 + 77}, {1 << 31, 1 << 31}, {1<<32 - 1, 1<<32 + 1}} {
		whole := stream.CombineChecksum(crc, 0, n[0]+n[1])
		steps := stream.CombineChecksum(stream.CombineChecksum(crc, 0, n[0]), 0, n[1])
		if whole != steps {
			t.Fatalf("shift over %d+%d bytes: %08x at once, %08x in two steps", n[0], n[1], whole, steps)
		}
	}
}

// TestCopyChecksum: the copy is src's bytes and the checksum extends crc
// with them, for lengths below, at and across copy blocks, into a longer
// dst whose rest is left alone.
func TestCopyChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	head := []byte("fields before the payload")
	const block = 64 << 10 // CopyChecksum's copy block
	for _, n := range []int{0, 1, block - 1, block, 3*block + 17} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		dst := bytes.Repeat([]byte{0xee}, n+9)
		got := stream.CopyChecksum(stream.Checksum(head), dst, src)
		if want := stream.Checksum(append(slices.Clone(head), src...)); got != want {
			t.Fatalf("%d bytes: checksum %08x, want %08x", n, got, want)
		}
		if !bytes.Equal(dst[:n], src) || !bytes.Equal(dst[n:], bytes.Repeat([]byte{0xee}, 9)) {
			t.Fatalf("%d bytes: the copy differs from src or wrote past it", n)
		}
	}
}
