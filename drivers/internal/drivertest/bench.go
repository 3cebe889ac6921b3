package drivertest

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// BenchSize is a payload size of the benchmarks, with its name in
// sub-benchmark names.
type BenchSize struct {
	Name string
	N    int
}

// BenchSizes are the payload sizes the driver benchmarks compare: 1 KiB,
// 64 KiB and 1 MiB.
var BenchSizes = []BenchSize{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// OpenStreams opens n streams, bench/0 to bench/N-1, on store (epoch 1,
// created if missing); they are closed when b ends, before cleanups b
// registered earlier (such as closing store) run.
func OpenStreams(b *testing.B, store *stream.Store, n int) []*stream.Stream {
	b.Helper()
	ss := make([]*stream.Stream, n)
	for i := range ss {
		s, err := store.Open(b.Context(), "bench/"+strconv.Itoa(i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		ss[i] = s
	}
	return ss
}

// EngineAppends is an append benchmark of the chunked engine on st: it
// runs a Store on st with opts (closed, with st, when b ends), opens
// streams streams (OpenStreams) and measures b.N appends of size bytes
// (Appends, window appends in flight per stream). It returns the requests
// st made during the appends.
func EngineAppends[S interface {
	chunked.Storage
	chunked.StatsReporter
}](b *testing.B, st S, opts chunked.Options, streams, size, window int) chunked.RequestStats {
	b.Helper()
	store, err := driverconfig.NewStore(st, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	ss := OpenStreams(b, store, streams)
	before := st.RequestStats()
	Appends(b, ss, make([]byte, size), window)
	return st.RequestStats().Sub(before)
}

// Appends is the measured part of an append benchmark: b.N appends of
// payload split among streams, each stream keeping up to window appends
// outstanding (called, not yet acked). It sets the bytes per operation,
// times only the appends, and reports p50-ms and p99-ms of single appends,
// submit to ack (with a deep window that includes the queue, by Little's
// law); a failed append fails b.
func Appends(b *testing.B, streams []*stream.Stream, payload []byte, window int) {
	Loops(b, len(payload), len(streams), func(w, n int, lat *[]time.Duration) error {
		var first error
		i := 0
		more := func() bool { i++; return i <= n }
		_, ds := pipeline(b.Context(), streams[w], payload, window, more, func(err error) {
			if first == nil {
				first = err
			}
		})
		*lat = append(*lat, ds...)
		return first
	})
}

// Ops is the measured part of a benchmark of single operations: b.N calls
// of op split among workers goroutines, where op(w, i) is worker w's i-th
// call and moves bytesPerOp bytes. It times only the calls and reports
// p50-ms and p99-ms of one call; the first error stops its worker and
// fails b.
func Ops(b *testing.B, bytesPerOp, workers int, op func(w, i int) error) {
	Loops(b, bytesPerOp, workers, func(w, n int, lat *[]time.Duration) error {
		for i := range n {
			start := time.Now()
			if err := op(w, i); err != nil {
				return err
			}
			*lat = append(*lat, time.Since(start))
		}
		return nil
	})
}

// Loops runs worker(w, n, lat) for each of workers goroutines, worker w
// doing its share n of b.N operations and adding their latencies to lat.
// It sets the bytes per operation, times only the workers, fails b with a
// worker's error, and reports p50-ms and p99-ms.
func Loops(b *testing.B, bytesPerOp, workers int, worker func(w, n int, lat *[]time.Duration) error) {
	var all Latencies
	b.SetBytes(int64(bytesPerOp))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		n := Split(b.N, workers, w)
		wg.Go(func() {
			ds := make([]time.Duration, 0, n)
			if err := worker(w, n, &ds); err != nil {
				b.Error(err)
			}
			all.Add(ds)
		})
	}
	wg.Wait()
	b.StopTimer()
	all.Report(b)
}

// Latencies collects operation latencies from several goroutines.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records ds.
func (l *Latencies) Add(ds []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, ds...)
	l.mu.Unlock()
}

// Report adds the p50-ms and p99-ms metrics to b (none when nothing was
// recorded).
func (l *Latencies) Report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	b.ReportMetric(QuantileMs(l.d, 0.50), "p50-ms")
	b.ReportMetric(QuantileMs(l.d, 0.99), "p99-ms")
}

// QuantileMs sorts ds and returns its p quantile (0 to 1) in milliseconds;
// 0 for no latencies.
func QuantileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
}

// Split is worker i's share when n operations are divided among k
// workers.
func Split(n, k, i int) int {
	if i < n%k {
		return n/k + 1
	}
	return n / k
}

// ReportRequests adds to b, for the requests between before and after:
// list (LIST requests), and per GiB of payload put/GiB (PUTs) and req/GiB
// (requests of every kind, retries included).
func ReportRequests(b *testing.B, before, after chunked.RequestStats, payload int64) {
	d := after.Sub(before)
	b.ReportMetric(float64(d.Lists), "list")
	if payload <= 0 {
		return
	}
	perGiB := float64(1<<30) / float64(payload)
	b.ReportMetric(float64(d.Puts)*perGiB, "put/GiB")
	b.ReportMetric(float64(RequestCount(d))*perGiB, "req/GiB")
}

// RequestCount is the number of requests of every kind in d (retries
// included).
func RequestCount(d chunked.RequestStats) int64 {
	return d.Puts + d.Gets + d.Heads + d.Lists + d.Deletes
}
