package s3

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

var benchLingers = []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}

// The deep per-stream window of appends in flight: at most windowAppends
// appends and windowBytes of payload.
const (
	windowAppends = 256
	windowBytes   = 16 << 20
)

func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		deep := max(1, min(windowAppends, windowBytes/size.n))
		for _, streams := range []int{1, 16} {
			for _, conc := range []int{streams, streams * chunked.DefaultMaxInflightChunks} {
				b.Run(fmt.Sprintf("size=%s/raw/conc=%d", size.name, conc), func(b *testing.B) {
					benchRaw(b, size.n, conc)
				})
			}
			for _, window := range []int{1, deep} {
				for _, linger := range benchLingers {
					b.Run(fmt.Sprintf("size=%s/streams=%d/window=%d/linger=%v", size.name, streams, window, linger), func(b *testing.B) {
						benchAppend(b, size.n, streams, window, linger)
					})
				}
			}
		}
	}
}

// benchRaw: conc goroutines share b.N PutObject calls of size bytes.
func benchRaw(b *testing.B, size, conc int) {
	st := newStorage(b, minioConfig(b))
	ctx := context.Background()
	payload := make([]byte, size)
	var next atomic.Int64
	var lat latencies
	before := st.RequestStats()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range conc {
		wg.Go(func() {
			var ds []time.Duration
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				t0 := time.Now()
				if err := st.Put(ctx, fmt.Sprintf("raw/%d/%d", g, i), payload); err != nil {
					b.Error(err)
					return
				}
				ds = append(ds, time.Since(t0))
			}
			lat.add(ds)
		})
	}
	wg.Wait()
	b.StopTimer()
	lat.report(b)
	reportRequests(b, before, st.RequestStats(), int64(b.N)*int64(size))
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
	defer store.Close()
	ctx := context.Background()
	ss := make([]stream.Stream, streams)
	for i := range ss {
		if ss[i], err = store.Open(ctx, fmt.Sprintf("bench/%d", i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
			b.Fatal(err)
		}
		defer ss[i].Close()
	}
	chunksBefore := countChunks(b, st)
	payload := make([]byte, size)
	var lat latencies
	before := st.RequestStats()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, s := range ss {
		n := b.N / streams
		if i < b.N%streams {
			n++
		}
		wg.Go(func() {
			type pending struct {
				f  *stream.AppendFuture
				t0 time.Time
			}
			// slots bounds the appends in flight: taken before Append,
			// given back when the ack arrives.
			slots := make(chan struct{}, window)
			inflight := make(chan pending, window)
			done := make(chan []time.Duration)
			go func() {
				var ds []time.Duration
				for p := range inflight {
					if _, err := p.f.Wait(ctx); err != nil {
						b.Error(err)
					}
					ds = append(ds, time.Since(p.t0))
					<-slots
				}
				done <- ds
			}()
			for range n {
				slots <- struct{}{}
				t0 := time.Now()
				inflight <- pending{s.Append(ctx, stream.Batch{Count: 1, Payload: payload}), t0}
			}
			close(inflight)
			lat.add(<-done)
		})
	}
	wg.Wait()
	b.StopTimer()
	after := st.RequestStats()
	lat.report(b)
	appended := int64(b.N) * int64(size)
	reportRequests(b, before, after, appended)

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

// latencies collects operation latencies from several goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(ds []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, ds...)
	l.mu.Unlock()
}

// report adds p50-ms and p99-ms.
func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	q := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// reportRequests adds put/GiB, req/GiB and list for the requests between
// before and after.
func reportRequests(b *testing.B, before, after chunked.RequestStats, payload int64) {
	d := diffStats(after, before)
	b.ReportMetric(float64(d.Lists), "list")
	if payload <= 0 {
		return
	}
	perGiB := float64(1<<30) / float64(payload)
	b.ReportMetric(float64(d.Puts)*perGiB, "put/GiB")
	b.ReportMetric(float64(d.Puts+d.Gets+d.Heads+d.Lists+d.Deletes)*perGiB, "req/GiB")
}
