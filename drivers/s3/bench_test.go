package s3

import (
	"context"
	"fmt"
	"strconv"
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
	if want > 0 {
		b.ReportMetric(readBack(b, cfg, streams, want), "get/GiB-read")
	}
}

// readBack fetches streams bench/0 to bench/streams-1 from offset 0 with
// a fresh store on cfg, fails b unless that reads want payload bytes, and
// returns the GETs it made per GiB read (0 when nothing was read).
func readBack(b *testing.B, cfg Config, streams int, want int64) float64 {
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
	if read == 0 {
		return 0
	}
	return float64(st.RequestStats().Gets-before.Gets) * float64(1<<30) / float64(read)
}

// BenchmarkCompare measures the append path against a raw PutObject loop
// of the same object sizes on the same MinIO, interleaved in time so that
// load from elsewhere on the machine hits every kind alike
// (drivertest.Compare: rounds of 250 ms slices, the order reversed every
// other round). Run it once:
//
//	go test -run '^$' -bench Compare -benchtime 1x -timeout 60m -v ./drivers/s3/
//
// For each payload size (1 KiB, 64 KiB, 1 MiB) and number of streams S
// (1, 16) the kinds are:
//
//	raw PutObject writers=S   S goroutines, each looping Storage.Put (one
//	                          PutObject) of a fresh key: the reference of
//	                          Storage.PutIfAbsent and of inflight=1
//	raw PutObject writers=4S  as many writers as the engine keeps chunk
//	                          puts in flight (S × 4): the reference of the
//	                          pipelined rows (every other row is given as
//	                          a share of both)
//	Storage.PutIfAbsent       S goroutines looping conditional PUTs of
//	                          fresh keys: the driver without the engine
//	append linger=L inflight=I  the driver's Store: S streams, each fed
//	                          by a goroutine keeping up to I appends
//	                          outstanding; L = 0, 10ms, 50ms; I = 1 (one
//	                          append at a time) and pipelined: 8 MiB of
//	                          payload outstanding per stream (8,192
//	                          appends of 1 KiB, 128 of 64 KiB, 8 of
//	                          1 MiB), the buffer of an asynchronous
//	                          producer (Kafka's buffer.memory is 32 MiB);
//	                          STRATA_BENCH_INFLIGHT caps the number (the
//	                          default was 32 until 2026-11-30: 32 KiB at
//	                          1 KiB, less than a chunk, so with a linger
//	                          every chunk waited the linger out)
//
// Each kind has a prefix and a Storage of its own. The table gives MB/s,
// p50/p99 of single operations, the test process's CPU µs per operation
// (MinIO's own CPU is not in it), MB/s as a share of each raw row ("of
// raw w=S", "of raw w=4S"), and from the kind's request
// counts: PUT/chunk (PUTs during the appends per chunk object written),
// LIST (LIST requests during the run: 0 is the target), req/GiB (requests
// of every kind per GiB of payload) and GET/GiB read (GETs a fresh store
// makes to read it all back). STRATA_BENCH_SIZES, STRATA_BENCH_STREAMS,
// STRATA_BENCH_ROUNDS and STRATA_BENCH_OUT as in drivertest.Compare.
// Results: docs/benchmarks.md.
func BenchmarkCompare(b *testing.B) {
	table := drivertest.NewTable([]string{"raw w=S", "raw w=4S"}, "PUT/chunk", "LIST", "req/GiB", "GET/GiB read")
	drivertest.Compare(b, table, []int{1 << 10, 64 << 10, 1 << 20}, []int{1, 16}, func(size, streams int) []*drivertest.Kind {
		return compareKinds(b, size, streams)
	})
}

// compareLingers are the engine lingers BenchmarkCompare runs (issue 5's
// matrix).
var compareLingers = []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond}

// compareKinds is one group of BenchmarkCompare.
func compareKinds(b *testing.B, size, streams int) []*drivertest.Kind {
	payload := make([]byte, size)
	depth := drivertest.PipelineDepth(size)
	deepWriters := streams * chunked.DefaultMaxInflightChunks
	raw := putKind(b, fmt.Sprintf("raw PutObject writers=%d", streams), payload, streams, (*Storage).Put, nil)
	rawDeep := putKind(b, fmt.Sprintf("raw PutObject writers=%d", deepWriters), payload, deepWriters, (*Storage).Put, nil)
	refs := []*drivertest.Kind{raw, rawDeep}
	kinds := []*drivertest.Kind{
		raw,
		rawDeep,
		putKind(b, "Storage.PutIfAbsent", payload, streams, (*Storage).PutIfAbsent, refs),
	}
	for _, inflight := range []int{1, depth} {
		for _, linger := range compareLingers {
			kinds = append(kinds, appendKind(b, payload, streams, linger, inflight, refs))
		}
	}
	return kinds
}

// putKind is a kind of writers goroutines, each looping put of fresh keys
// on a Storage of its own; of are the rows it is a share of.
func putKind(b *testing.B, name string, payload []byte, writers int, put func(*Storage, context.Context, string, []byte) error, of []*drivertest.Kind) *drivertest.Kind {
	st, err := OpenStorage(b.Context(), minioConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	before := st.RequestStats()
	return &drivertest.Kind{
		Name: name,
		Of:   of,
		Run: drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
			return put(st, b.Context(), fmt.Sprintf("w%d/%020d", w, seq), payload)
		}),
		Extra: func(k *drivertest.Kind) []string {
			d := st.RequestStats().Sub(before)
			return []string{"", strconv.FormatInt(d.Lists, 10), perGiB(drivertest.RequestCount(d), k.Bytes()), ""}
		},
		Close: func() { st.Close() },
	}
}

// appendKind is a kind of appends through a Store of its own (engine
// linger linger, defaults otherwise) on streams streams, each keeping up
// to inflight appends outstanding; its row is a share of the rows of.
func appendKind(b *testing.B, payload []byte, streams int, linger time.Duration, inflight int, of []*drivertest.Kind) *drivertest.Kind {
	cfg := minioConfig(b)
	cfg.Engine.Linger = linger
	st, err := OpenStorage(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	store, err := chunked.NewStore(st, engineOptions(cfg))
	if err != nil {
		b.Fatal(err)
	}
	ss := make([]*stream.Stream, streams)
	for i := range ss {
		if ss[i], err = store.Open(b.Context(), fmt.Sprintf("bench/%d", i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
			b.Fatal(err)
		}
	}
	chunksBefore := countChunks(b, st)
	before := st.RequestStats()
	return &drivertest.Kind{
		Name: fmt.Sprintf("append linger=%v inflight=%d", linger, inflight),
		Run:  drivertest.AppendRunner(b, ss, payload, inflight),
		Of:   of,
		Extra: func(k *drivertest.Kind) []string {
			d := st.RequestStats().Sub(before)
			putsPerChunk := "-"
			if chunks := countChunks(b, st) - chunksBefore; chunks > 0 {
				putsPerChunk = fmt.Sprintf("%.2f", float64(d.Puts)/float64(chunks))
			}
			return []string{putsPerChunk, strconv.FormatInt(d.Lists, 10), perGiB(drivertest.RequestCount(d), k.Bytes()),
				fmt.Sprintf("%.0f", readBack(b, cfg, streams, k.Bytes()))}
		},
		Close: func() {
			for _, s := range ss {
				s.Close()
			}
			store.Close()
		},
	}
}

// perGiB renders n per GiB of payload bytes.
func perGiB(n, payload int64) string {
	if payload <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(n)*float64(1<<30)/float64(payload))
}
