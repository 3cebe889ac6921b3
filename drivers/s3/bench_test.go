package s3

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// The benchmarks put the driver's append path next to a raw PutObject loop
// of the same payload sizes, on the same MinIO, in the same run:
//
//	BenchmarkAppend/size=S/raw/conc=C                  C goroutines, each a
//	                                                   loop of one PutObject
//	BenchmarkAppend/size=S/streams=N/window=W/linger=L N streams, each with
//	                                                   up to W appends in
//	                                                   flight, then read back
//
// W is 1 (each stream waits for its ack before the next append: latency)
// or deep, min(256 appends, 16 MiB) (throughput; latency then includes the
// queue, by Little's law). C is N (next to window=1) and N × the engine's
// in-flight chunk limit (the request concurrency the append path may use). Every sub-benchmark reports MB/s (SetBytes), p50-ms
// and p99-ms of single appends (submit to ack) or PUTs, put/GiB and
// req/GiB (all requests, retries included, per GiB of payload), list (LIST
// requests during the appends: must be 0); the append runs add put/chunk
// (PUTs during the appends per chunk object they wrote: hints and
// checkpoint manifests are the rest) and get/GiB-read (GETs
// per GiB fetched back by a fresh store). Results: docs/benchmarks.md.

var benchLingers = []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}

// The deep per-stream window of appends in flight: at most windowAppends
// appends and windowBytes of payload.
const (
	windowAppends = 256
	windowBytes   = 16 << 20
)

func BenchmarkAppend(b *testing.B) {
	for _, size := range drivertest.BenchSizes {
		deep := max(1, min(windowAppends, windowBytes/size.N))
		for _, streams := range []int{1, 16} {
			for _, conc := range []int{streams, streams * chunked.DefaultMaxInflightChunks} {
				b.Run(fmt.Sprintf("size=%s/raw/conc=%d", size.Name, conc), func(b *testing.B) {
					benchRaw(b, size.N, conc)
				})
			}
			for _, window := range []int{1, deep} {
				for _, linger := range benchLingers {
					b.Run(fmt.Sprintf("size=%s/streams=%d/window=%d/linger=%v", size.Name, streams, window, linger), func(b *testing.B) {
						benchAppend(b, size.N, streams, window, linger)
					})
				}
			}
		}
	}
}

// benchRaw: conc goroutines share b.N PutObject calls of size bytes.
func benchRaw(b *testing.B, size, conc int) {
	st := newStorage(b, minioConfig(b))
	payload := make([]byte, size)
	before := st.RequestStats()
	drivertest.Ops(b, size, conc, func(g, i int) error {
		return st.Put(context.Background(), fmt.Sprintf("raw/%d/%d", g, i), payload)
	})
	drivertest.ReportRequests(b, before, st.RequestStats(), int64(b.N)*int64(size))
}

// benchAppend: streams streams share b.N appends of size bytes, each
// stream keeping up to window appends in flight; then a fresh store reads
// everything back.
func benchAppend(b *testing.B, size, streams, window int, linger time.Duration) {
	cfg := minioConfig(b)
	cfg.Engine.Linger = linger
	st := newStorage(b, cfg)
	store, err := chunked.NewStore(st, engineOptions(st.cfg))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	ss := drivertest.OpenStreams(b, store, streams)
	chunksBefore := countChunks(b, st)
	before := st.RequestStats()
	drivertest.Appends(b, ss, make([]byte, size), window)
	after := st.RequestStats()
	appended := int64(b.N) * int64(size)
	drivertest.ReportRequests(b, before, after, appended)

	if chunks := countChunks(b, st) - chunksBefore; chunks > 0 {
		b.ReportMetric(float64(after.Puts-before.Puts)/float64(chunks), "put/chunk")
	}
	benchReadBack(b, cfg, streams, appended)
}

// countChunks counts the chunk objects in st (one LIST per 1000 keys,
// made outside the measured window).
func countChunks(b *testing.B, st *Storage) int {
	keys, err := st.List(context.Background(), "", "", 0)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if strings.Contains(k, "/c/") {
			n++
		}
	}
	return n
}

// benchReadBack fetches every stream from offset 0 with a fresh store and
// reports get/GiB-read.
func benchReadBack(b *testing.B, cfg Config, streams int, want int64) {
	ctx := context.Background()
	st := newStorage(b, cfg)
	store, err := chunked.NewStore(st, engineOptions(st.cfg))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	before := st.RequestStats()
	var read int64
	for i := range streams {
		s, err := store.Open(ctx, fmt.Sprintf("bench/%d", i), stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < s.NextOffset(); {
			batches, err := s.Fetch(ctx, off, stream.NoEnd, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, bt := range batches {
				read += int64(len(bt.Payload))
				off = bt.BaseOffset + int64(bt.Count)
			}
		}
		s.Close()
	}
	if read != want {
		b.Fatalf("read back %d payload bytes, appended %d", read, want)
	}
	if read > 0 {
		gets := st.RequestStats().Gets - before.Gets
		b.ReportMetric(float64(gets)*float64(1<<30)/float64(read), "get/GiB-read")
	}
}
