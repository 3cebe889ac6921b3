package drivertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// A comparison benchmark (a driver's BenchmarkCompare) puts the driver's
// appends next to raw loops on the same backend, interleaved in time so
// that load from elsewhere on the machine hits every kind alike: for each
// payload size and number of streams, the kinds of one group run in
// rounds of CompareSlice each, the order reversed every other round, and
// each kind becomes a row of MB/s, p50 and p99 of single operations, the
// process's CPU time per operation and MB/s as a share of reference rows.
//
// The environment narrows and redirects it:
//
//	STRATA_BENCH_SIZES    payload sizes in bytes, comma-separated
//	STRATA_BENCH_STREAMS  numbers of streams, comma-separated
//	STRATA_BENCH_ROUNDS   rounds per group (default 8)
//	STRATA_BENCH_OUT      a file to write the table to as well
//	STRATA_BENCH_INFLIGHT caps PipelineDepth (default 8192)

// CompareSlice is how long each kind runs per round.
const CompareSlice = 250 * time.Millisecond

// PipelinedBytes is the payload a pipelined stream keeps outstanding
// (appended, not yet acked) in a comparison: the buffer of an asynchronous
// producer (Kafka's buffer.memory is 32 MiB for all of a producer's
// partitions). It also bounds how long a slice spends filling and
// draining its pipeline: 16 streams with 32 MiB each queued more than a
// whole CompareSlice of work on the nfs driver.
const PipelinedBytes = 8 << 20

// PipelineDepth is how many size-byte appends a pipelined stream keeps
// outstanding: PipelinedBytes worth (8,192 of 1 KiB, 128 of 64 KiB, 8 of
// 1 MiB), at most STRATA_BENCH_INFLIGHT.
func PipelineDepth(size int) int {
	return max(1, min(EnvInts("STRATA_BENCH_INFLIGHT", 8192)[0], PipelinedBytes/max(1, size)))
}

// Runner runs one kind for a slice of time d and returns the payload
// bytes it moved, the wall time until its last operation finished (d plus
// the time to drain what was in flight at the deadline) and the latencies
// of its single operations.
type Runner = func(d time.Duration) (bytes int64, elapsed time.Duration, lat []time.Duration)

// Kind is one row of a comparison: what runs, and what it measured over
// the rounds.
type Kind struct {
	// Name names the row.
	Name string
	// Run runs the kind for one slice.
	Run Runner
	// Of are the rows whose MB/s this row is shown as a share of, one per
	// share column of the Table (nil entries, or too few, leave the cells
	// empty).
	Of []*Kind
	// Extra, when set, returns the row's cells in the Table's extra
	// columns; it is called once, after the group's rounds.
	Extra func(k *Kind) []string
	// Close, when set, releases what Run uses; it is called once the
	// group's rows are in the table.
	Close func()

	bytes   int64
	elapsed time.Duration
	cpu     time.Duration // user+system CPU of this process while it ran
	lat     []time.Duration
}

// Bytes is the payload bytes the kind moved over all rounds.
func (k *Kind) Bytes() int64 { return k.bytes }

// MBps is the kind's payload throughput over all rounds, in MB/s.
func (k *Kind) MBps() float64 {
	if k.elapsed <= 0 {
		return 0
	}
	return float64(k.bytes) / k.elapsed.Seconds() / 1e6
}

// QuantileMs is the p quantile (0 to 1) of the kind's single operations,
// in milliseconds.
func (k *Kind) QuantileMs(p float64) float64 { return QuantileMs(k.lat, p) }

// CPUPerOp is the process's CPU time per operation of the kind, in µs.
func (k *Kind) CPUPerOp() float64 {
	return float64(k.cpu.Microseconds()) / float64(max(1, len(k.lat)))
}

// Interleave runs kinds for rounds rounds of slice each, in the given
// order in even rounds and in reverse in odd ones, and accumulates each
// kind's bytes, wall time, CPU time and latencies.
func Interleave(kinds []*Kind, rounds int, slice time.Duration) {
	for r := range rounds {
		order := slices.Clone(kinds)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, k := range order {
			c0 := CPUTime()
			n, el, lat := k.Run(slice)
			k.cpu += CPUTime() - c0
			k.bytes += n
			k.elapsed += el
			k.lat = append(k.lat, lat...)
		}
	}
}

// CPUTime is the user+system CPU time this process used so far (0 if the
// system does not say).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Table is the Markdown table of a comparison: size, streams, kind, MB/s,
// p50 ms, p99 ms, CPU µs/op, one "of X" share column per reference and
// the extra columns.
type Table struct {
	of, extra []string
	b         strings.Builder
}

// NewTable starts a table whose share columns are "of " + each of of, and
// whose extra columns are headed extra.
func NewTable(of []string, extra ...string) *Table {
	t := &Table{of: of, extra: extra}
	heads := []string{"size", "streams", "kind", "MB/s", "p50 ms", "p99 ms", "CPU µs/op"}
	for _, o := range of {
		heads = append(heads, "of "+o)
	}
	heads = append(heads, extra...)
	fmt.Fprintf(&t.b, "| %s |\n|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(heads)))
	return t
}

// Add adds a row per kind of a group of size-byte payloads on streams
// streams.
func (t *Table) Add(size, streams int, kinds []*Kind) {
	for _, k := range kinds {
		fmt.Fprintf(&t.b, "| %s | %d | %s | %s | %.2f | %.2f | %.0f |",
			SizeName(size), streams, k.Name, mbps(k.MBps()), k.QuantileMs(0.5), k.QuantileMs(0.99), k.CPUPerOp())
		for i := range t.of {
			cell := ""
			if i < len(k.Of) && k.Of[i] != nil {
				cell = fmt.Sprintf("%.0f%%", 100*k.MBps()/k.Of[i].MBps())
			}
			fmt.Fprintf(&t.b, " %s |", cell)
		}
		var extra []string
		if k.Extra != nil {
			extra = k.Extra(k)
		}
		for i := range t.extra {
			cell := ""
			if i < len(extra) {
				cell = extra[i]
			}
			fmt.Fprintf(&t.b, " %s |", cell)
		}
		t.b.WriteByte('\n')
	}
}

// mbps renders a throughput in MB/s: one decimal, three below 1 MB/s
// (small payloads on a request-bound backend).
func mbps(v float64) string {
	if v < 1 {
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// String is the table so far.
func (t *Table) String() string { return t.b.String() }

// Compare is the body of a comparison benchmark: for each payload size
// (STRATA_BENCH_SIZES, else sizes) and number of streams
// (STRATA_BENCH_STREAMS, else streams), group builds the kinds, which run
// interleaved (Interleave) for STRATA_BENCH_ROUNDS rounds (default 8) of
// CompareSlice; their rows go to t, then their Close runs. At the end it
// logs t and writes it to the file STRATA_BENCH_OUT names, if any.
func Compare(b *testing.B, t *Table, sizes, streams []int, group func(size, streams int) []*Kind) {
	b.Helper()
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("STRATA_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	sizes, streams = EnvInts("STRATA_BENCH_SIZES", sizes...), EnvInts("STRATA_BENCH_STREAMS", streams...)
	for b.Loop() {
		for _, size := range sizes {
			for _, n := range streams {
				kinds := group(size, n)
				Interleave(kinds, rounds, CompareSlice)
				t.Add(size, n, kinds)
				for _, k := range kinds {
					if k.Close != nil {
						k.Close()
					}
				}
			}
		}
	}
	b.Log("\n" + t.String())
	if out := os.Getenv("STRATA_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(t.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// EnvInts reads a comma-separated list of positive ints from the
// environment variable name, else returns def.
func EnvInts(name string, def ...int) []int {
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

// SizeName names a payload size in a table: "64 KiB", "1 MiB".
func SizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + " MiB"
	}
	return strconv.Itoa(n>>10) + " KiB"
}

// Parallel runs work(w, deadline) on n goroutines, deadline being d from
// now, and returns the bytes they moved, the wall time until the last
// finished, and all their latencies.
func Parallel(n int, d time.Duration, work func(w int, deadline time.Time) (int64, []time.Duration)) (int64, time.Duration, []time.Duration) {
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

// LoopRunner is a Runner of writers goroutines, each looping op(w, seq)
// with seq = 1, 2, ... (continuing across slices) until the deadline and
// timing each call; an op moves size bytes. The first error of a writer
// fails b and ends the writer's slice.
func LoopRunner(b testing.TB, size, writers int, op func(w, seq int) error) Runner {
	seq := make([]int, writers)
	return func(d time.Duration) (int64, time.Duration, []time.Duration) {
		return Parallel(writers, d, func(w int, deadline time.Time) (int64, []time.Duration) {
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

// AppendRunner is a Runner of one goroutine per stream, each appending
// payload (one record per batch) and keeping up to inflight appends
// outstanding (called, not yet acked) until the deadline, then waiting for
// the rest. Latency is from Append to ack; failed appends fail b and are
// not counted.
func AppendRunner(b testing.TB, streams []*stream.Stream, payload []byte, inflight int) Runner {
	return func(d time.Duration) (int64, time.Duration, []time.Duration) {
		return Parallel(len(streams), d, func(w int, deadline time.Time) (int64, []time.Duration) {
			more := func() bool { return time.Now().Before(deadline) }
			return pipeline(b.Context(), streams[w], payload, inflight, more, func(err error) { b.Error(err) })
		})
	}
}

// pipeline appends payload to s while more() holds, keeping at most window
// appends outstanding (called, not yet acked), and returns the payload
// bytes acked and the latencies of the acked appends, from Append to ack.
// The error of a failed append goes to fail.
func pipeline(ctx context.Context, s *stream.Stream, payload []byte, window int, more func() bool, fail func(error)) (int64, []time.Duration) {
	type pending struct {
		f     *stream.AppendFuture
		start time.Time
	}
	window = max(1, window)
	// tokens bounds the appends outstanding to window; queue carries them
	// to the waiter.
	tokens := make(chan struct{}, window)
	queue := make(chan pending, window)
	go func() {
		defer close(queue)
		for more() {
			tokens <- struct{}{}
			start := time.Now()
			queue <- pending{s.Append(ctx, stream.Batch{Count: 1, Payload: payload}), start}
		}
	}()
	var n int64
	var lat []time.Duration
	for p := range queue {
		_, err := p.f.Wait(ctx)
		<-tokens
		if err != nil {
			fail(err)
			continue
		}
		lat = append(lat, time.Since(p.start))
		n += int64(len(payload))
	}
	return n, lat
}
