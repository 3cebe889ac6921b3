package chunked

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// BenchmarkAppend measures the engine's own overhead: pipelined appends
// (up to 4096 unacknowledged) to one stream on MemStorage, whose calls cost
// next to nothing but a copy of each chunk. MB/s is payload throughput;
// cpu-µs/op is the process's user+system CPU time per append (getrusage),
// steadier than MB/s on a loaded machine.
//
//	go test ./stream/chunked -run XXX -bench Append -benchtime 2s
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
			b.Run(fmt.Sprintf("size=%dKiB/linger=%v", size>>10, linger), func(b *testing.B) {
				benchAppend(b, size, Options{Linger: linger}, false)
			})
		}
	}
}

// BenchmarkAppendSuppliedChecksum compares the engine's CPU per 1 MiB
// append when it checksums the payload itself (checksum=engine) and when
// the caller supplies it (checksum=supplied, stream.Batch.PayloadChecksum:
// the payload is copied but not read again).
//
//	go test ./stream/chunked -run XXX -bench AppendSuppliedChecksum -benchtime 2000x -count 3
func BenchmarkAppendSuppliedChecksum(b *testing.B) {
	for _, supplied := range []bool{false, true} {
		name := "checksum=engine"
		if supplied {
			name = "checksum=supplied"
		}
		b.Run(name, func(b *testing.B) { benchAppend(b, 1<<20, Options{}, supplied) })
	}
}

func benchAppend(b *testing.B, size int, opts Options, supplied bool) {
	ctx := context.Background()
	s, err := NewStore(NewMemStorage(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "bench", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	batch := stream.Batch{Count: 1, Payload: payload}
	if supplied {
		batch.PayloadChecksum, batch.PayloadChecksumSet = stream.Checksum(payload), true
	}
	window := make(chan *stream.AppendFuture, 4096)
	done := make(chan error, 1)
	go func() {
		var err error
		for f := range window {
			if _, e := f.Result(); e != nil && err == nil {
				err = e
			}
		}
		done <- err
	}()
	b.SetBytes(int64(size))
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		window <- st.Append(ctx, batch)
	}
	close(window)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	if got := st.NextOffset(); got != int64(b.N) {
		b.Fatalf("next offset %d after %d appends", got, b.N)
	}
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEncodeBatchBody isolates what Append does with a 1 MiB payload:
// copy it into the chunk buffer and checksum it (checksum=engine), or only
// copy it and combine the supplied checksum (checksum=supplied).
//
//	go test ./stream/chunked -run XXX -bench EncodeBatchBody -count 5
func BenchmarkEncodeBatchBody(b *testing.B) {
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, supplied := range []bool{false, true} {
		name := "checksum=engine"
		bt := stream.Batch{Count: 1, Payload: payload}
		if supplied {
			name = "checksum=supplied"
			bt.PayloadChecksum, bt.PayloadChecksumSet = stream.Checksum(payload), true
		}
		b.Run(name, func(b *testing.B) {
			e := make([]byte, batchEncodedLen(bt))
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				encodeBatchBody(e, bt)
			}
		})
	}
}

// BenchmarkMetadataBytes appends b.N one-record batches, one chunk each
// (MaxChunkBytes 1), 256 in flight, to one stream that is never trimmed,
// and reports the bytes put to manifests and index pages per chunk and
// the largest manifest, with index pages (the default) and without
// (IndexPageEntries -1: every manifest lists every chunk).
//
//	go test ./stream/chunked -run XXX -bench MetadataBytes -benchtime 100000x
func BenchmarkMetadataBytes(b *testing.B) {
	for _, pages := range []int{0, -1} {
		name := "pages=default"
		if pages < 0 {
			name = "pages=off"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			mb := &metaBytes{MemStorage: NewMemStorage()}
			s := newTestStore(b, mb, Options{Driver: "bench", MaxChunkBytes: 1, MaxInflightChunks: 16, IndexPageEntries: pages})
			w := mustOpen(b, s, "m", 1)
			b.ResetTimer()
			fs := make([]*stream.AppendFuture, 0, 256)
			wait := func() {
				for _, f := range fs {
					if _, err := f.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				fs = fs[:0]
			}
			for i := range b.N {
				if len(fs) == cap(fs) {
					wait()
				}
				fs = append(fs, w.Append(ctx, stream.Batch{Count: 1, Payload: payload(i)}))
			}
			wait()
			b.StopTimer()
			_ = w.Close()
			b.ReportMetric(float64(mb.manifests.Load()+mb.pages.Load())/float64(b.N), "meta-B/chunk")
			b.ReportMetric(float64(mb.largest.Load()), "largest-manifest-B")
		})
	}
}
