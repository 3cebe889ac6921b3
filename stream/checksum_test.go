package stream_test

import (
	"math/rand/v2"
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
