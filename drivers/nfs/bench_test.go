package nfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
)

// BenchmarkCompare measures the driver's appends against the physical limit
// of the same directory, interleaved in time so that load from elsewhere on
// the machine hits both alike. Run it once:
//
//	go test -run '^$' -bench Compare -benchtime 1x -v ./drivers/nfs/
//
// For each batch size (1 KiB, 64 KiB, 1 MiB) and number of streams (1, 16)
// it runs, in rounds of benchSlice each, alternating:
//
//	raw          per writer: write temp + fsync + close + link(2) + unlink
//	raw+dirsync  the same + fsync of the directory (the driver's durable put)
//	fsync        per writer: write a new file + fsync ("one fsync")
//	Storage.PutIfAbsent  per writer: the driver's Storage alone, no engine
//	append       the driver: linger 0 / 2ms × 1 / 32 appends in flight per stream
//
// with as many writers as streams (STRATA_BENCH_SIZES and
// STRATA_BENCH_STREAMS, comma-separated, narrow the matrix;
// STRATA_BENCH_ROUNDS sets the rounds, default 8), and prints MB/s, p50
// and p99 of single operations, the process's CPU time per operation, and
// MB/s as a share of raw. STRATA_BENCH_OUT names a file to write the table
// to as well. Results: docs/benchmarks.md.
func BenchmarkCompare(b *testing.B) {
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("STRATA_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| size | streams | kind | MB/s | p50 ms | p99 ms | CPU µs/op | of raw | of raw+dirsync |\n|---|---|---|---|---|---|---|---|---|\n")
	sizes, streamCounts := envInts("STRATA_BENCH_SIZES", 1<<10, 64<<10, 1<<20), envInts("STRATA_BENCH_STREAMS", 1, 16)
	for b.Loop() {
		for _, size := range sizes {
			for _, streams := range streamCounts {
				compareGroup(b, &table, size, streams, rounds)
			}
		}
	}
	b.Log("\n" + table.String())
	if out := os.Getenv("STRATA_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// envInts reads a comma-separated list of ints from the environment, else
// returns def.
func envInts(name string, def ...int) []int {
	var out []int
	for f := range strings.SplitSeq(os.Getenv(name), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}

// benchSlice is how long each kind runs per round.
const benchSlice = 250 * time.Millisecond

// measured accumulates one kind's rounds.
type measured struct {
	name    string
	run     runner
	bytes   int64
	elapsed time.Duration
	cpu     time.Duration // user+system CPU of this process while it ran
	lat     []time.Duration
}

// cpuTime is the user+system CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (m *measured) mbps() float64 { return float64(m.bytes) / m.elapsed.Seconds() / 1e6 }

func (m *measured) quantile(p float64) float64 { return drivertest.QuantileMs(m.lat, p) }

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + " MiB"
	}
	return strconv.Itoa(n>>10) + " KiB"
}

func compareGroup(b *testing.B, table *strings.Builder, size, streams, rounds int) {
	root := freshRoot(b)
	payload := make([]byte, size)
	kinds := []*measured{
		{name: "raw", run: rawRunner(b, filepath.Join(root, "raw"), payload, streams, false)},
		{name: "raw+dirsync", run: rawRunner(b, filepath.Join(root, "rawsync"), payload, streams, true)},
		{name: "fsync", run: fsyncRunner(b, filepath.Join(root, "fsync"), payload, streams)},
		{name: "Storage.PutIfAbsent", run: storageRunner(b, filepath.Join(root, "storage"), payload, streams)},
	}
	for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
		for _, inflight := range []int{1, 32} {
			kinds = append(kinds, &measured{
				name: fmt.Sprintf("append linger=%v inflight=%d", linger, inflight),
				run:  appendRunner(b, filepath.Join(root, fmt.Sprintf("l%vi%d", linger, inflight)), payload, streams, linger, inflight),
			})
		}
	}
	for r := range rounds {
		order := slices.Clone(kinds)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, k := range order {
			c0 := cpuTime()
			n, el, lat := k.run(benchSlice)
			k.cpu += cpuTime() - c0
			k.bytes += n
			k.elapsed += el
			k.lat = append(k.lat, lat...)
		}
	}
	raw, rawSync := kinds[0].mbps(), kinds[1].mbps()
	for _, k := range kinds {
		share := func(of float64) string {
			if !strings.HasPrefix(k.name, "append") && !strings.HasPrefix(k.name, "Storage") {
				return ""
			}
			return fmt.Sprintf("%.0f%%", 100*k.mbps()/of)
		}
		fmt.Fprintf(table, "| %s | %d | %s | %.1f | %.2f | %.2f | %.0f | %s | %s |\n",
			sizeName(size), streams, k.name, k.mbps(), k.quantile(0.5), k.quantile(0.99),
			float64(k.cpu.Microseconds())/float64(max(1, len(k.lat))), share(raw), share(rawSync))
	}
}

// parallel runs work(w, deadline) on n goroutines and returns the bytes
// they moved, the wall time until the last finished, and all latencies.
func parallel(n int, d time.Duration, work func(w int, deadline time.Time) (int64, []time.Duration)) (int64, time.Duration, []time.Duration) {
	var (
		mu    sync.Mutex
		total int64
		all   []time.Duration
		wg    sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range n {
		wg.Go(func() {
			bytes, lat := work(w, deadline)
			mu.Lock()
			total += bytes
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total, time.Since(start), all
}

// runner runs one kind for a slice of time: bytes moved, wall time,
// latencies of single operations.
type runner = func(d time.Duration) (int64, time.Duration, []time.Duration)

// loopRunner: each of writers goroutines loops op(w, seq) with seq = 1, 2,
// ... (continuing across slices) until the deadline, timing each call; an
// op moves size bytes.
func loopRunner(b testing.TB, size, writers int, op func(w, seq int) error) runner {
	seq := make([]int, writers)
	return func(d time.Duration) (int64, time.Duration, []time.Duration) {
		return parallel(writers, d, func(w int, deadline time.Time) (int64, []time.Duration) {
			var n int64
			var lat []time.Duration
			for time.Now().Before(deadline) {
				seq[w]++
				start := time.Now()
				if err := op(w, seq[w]); err != nil {
					b.Error(err)
					break
				}
				lat = append(lat, time.Since(start))
				n += int64(size)
			}
			return n, lat
		})
	}
}

// rawRunner: each writer loops write temp + fsync + close + link to a new
// name (+ fsync of the directory) + unlink temp, in a directory of its own,
// as the driver does for each chunk.
func rawRunner(b testing.TB, dir string, payload []byte, writers int, dirsync bool) runner {
	for w := range writers {
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(w)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return loopRunner(b, len(payload), writers, func(w, seq int) error {
		return rawPut(filepath.Join(dir, strconv.Itoa(w)), strconv.Itoa(seq), payload, dirsync)
	})
}

// writeSynced creates path (which must not exist), writes payload, fsyncs
// and closes it.
func writeSynced(path string, payload []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(payload)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func rawPut(dir, name string, payload []byte, dirsync bool) error {
	tmp := filepath.Join(dir, "t")
	err := writeSynced(tmp, payload)
	if err == nil {
		err = os.Link(tmp, filepath.Join(dir, name))
	}
	if err == nil && dirsync {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if rerr := os.Remove(tmp); err == nil {
		err = rerr
	}
	return err
}

// fsyncRunner: each writer loops write a new file + fsync + close.
func fsyncRunner(b testing.TB, dir string, payload []byte, writers int) runner {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return loopRunner(b, len(payload), writers, func(w, seq int) error {
		return writeSynced(filepath.Join(dir, fmt.Sprintf("%d-%d", w, seq)), payload)
	})
}

// storageRunner: each writer loops Storage.PutIfAbsent of new keys of its
// own: the driver without the engine.
func storageRunner(b testing.TB, root string, payload []byte, writers int) runner {
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	st, err := openStorage(b.Context(), configFor(root))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return loopRunner(b, len(payload), writers, func(w, seq int) error {
		return st.PutIfAbsent(b.Context(), fmt.Sprintf("w%d/c/%020d", w, seq), payload)
	})
}

// appendRunner: a Store on its own directory with streams streams; each
// stream's goroutine keeps up to inflight appends outstanding (at most
// 32 MiB) until the deadline, then waits for the rest. Latency is from
// Append to ack.
func appendRunner(b testing.TB, root string, payload []byte, streams int, linger time.Duration, inflight int) runner {
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.Context(), configFor(root, "linger: "+linger.String()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	inflight = max(1, min(inflight, (32<<20)/len(payload)))
	sts := make([]stream.Stream, streams)
	for i := range sts {
		if sts[i], err = s.Open(b.Context(), "bench/"+strconv.Itoa(i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
			b.Fatal(err)
		}
	}
	return func(d time.Duration) (int64, time.Duration, []time.Duration) {
		return parallel(streams, d, func(w int, deadline time.Time) (int64, []time.Duration) {
			type pending struct {
				f     *stream.AppendFuture
				start time.Time
			}
			// tokens bounds the appends outstanding (called, not yet
			// acked) to inflight; window carries them to the waiter.
			tokens := make(chan struct{}, inflight)
			window := make(chan pending, inflight)
			go func() {
				for time.Now().Before(deadline) {
					tokens <- struct{}{}
					start := time.Now()
					window <- pending{sts[w].Append(b.Context(), stream.Batch{Count: 1, Payload: payload}), start}
				}
				close(window)
			}()
			var n int64
			var lat []time.Duration
			for p := range window {
				_, err := p.f.Wait(b.Context())
				<-tokens
				if err != nil {
					b.Error(err)
					continue
				}
				lat = append(lat, time.Since(p.start))
				n += int64(len(payload))
			}
			return n, lat
		})
	}
}
