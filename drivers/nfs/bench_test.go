package nfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// The benchmarks measure the driver's append path against the physical
// limit of the same directory in the same run:
//
//	BenchmarkAppend  size × streams × linger × in-flight appends per stream
//	BenchmarkRaw     a loop of write + fsync + link (and, as "raw+dirsync",
//	                 + fsync of the directory) per writer, same sizes
//	BenchmarkFsync   one write + fsync of a new file: "one fsync"
//
// Each reports MB/s (SetBytes), p50-ms and p99-ms of single operations.
// Results and analysis: docs/benchmarks.md, section "nfs driver".

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

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

// report adds p50-ms and p99-ms to b.
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

// split divides n operations among k workers.
func split(n, k, i int) int {
	return n/k + map[bool]int{true: 1, false: 0}[i < n%k]
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		for _, streams := range []int{1, 16} {
			for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
				for _, inflight := range []int{1, 32} {
					name := fmt.Sprintf("size=%s/streams=%d/linger=%v/inflight=%d", size.name, streams, linger, inflight)
					b.Run(name, func(b *testing.B) { benchAppend(b, size.n, streams, linger, inflight) })
				}
			}
		}
	}
}

// benchAppend: streams streams on one Store, each with a goroutine keeping
// up to inflight appends outstanding (bounded to 32 MiB per stream).
func benchAppend(b *testing.B, size, streams int, linger time.Duration, inflight int) {
	root := freshRoot(b)
	s, err := Open(b.Context(), configFor(root, "linger: "+linger.String()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	inflight = max(1, min(inflight, (32<<20)/size))
	sts := make([]stream.Stream, streams)
	for i := range sts {
		if sts[i], err = s.Open(b.Context(), "bench/"+strconv.Itoa(i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
			b.Fatal(err)
		}
		defer sts[i].Close()
	}
	payload := make([]byte, size)
	var lat latencies
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, st := range sts {
		n := split(b.N, streams, i)
		wg.Go(func() {
			type pending struct {
				f     *stream.AppendFuture
				start time.Time
			}
			window := make(chan pending, inflight)
			ds := make([]time.Duration, 0, n)
			go func() {
				for range n {
					start := time.Now()
					window <- pending{st.Append(b.Context(), stream.Batch{Count: 1, Payload: payload}), start}
				}
				close(window)
			}()
			for p := range window {
				if _, err := p.f.Wait(b.Context()); err != nil {
					b.Error(err)
					return
				}
				ds = append(ds, time.Since(p.start))
			}
			lat.add(ds)
		})
	}
	wg.Wait()
	b.StopTimer()
	lat.report(b)
}

func BenchmarkRaw(b *testing.B) {
	for _, size := range benchSizes {
		for _, writers := range []int{1, 16} {
			for _, dirsync := range []bool{false, true} {
				kind := "raw"
				if dirsync {
					kind = "raw+dirsync"
				}
				b.Run(fmt.Sprintf("%s/size=%s/writers=%d", kind, size.name, writers), func(b *testing.B) {
					benchRaw(b, size.n, writers, dirsync)
				})
			}
		}
	}
}

// benchRaw: writers goroutines each loop write temp + fsync + close +
// link(2) to a new name (+ fsync of the directory) + unlink temp, in a
// directory of their own, as the driver does per chunk.
func benchRaw(b *testing.B, size, writers int, dirsync bool) {
	root := freshRoot(b)
	payload := make([]byte, size)
	var lat latencies
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		n := split(b.N, writers, w)
		dir := filepath.Join(root, strconv.Itoa(w))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			ds := make([]time.Duration, 0, n)
			for i := range n {
				start := time.Now()
				tmp := filepath.Join(dir, "t")
				f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err == nil {
					_, err = f.Write(payload)
				}
				if err == nil {
					err = f.Sync()
				}
				if err == nil {
					err = f.Close()
				}
				if err == nil {
					err = os.Link(tmp, filepath.Join(dir, strconv.Itoa(i)))
				}
				if err == nil && dirsync {
					var d *os.File
					if d, err = os.Open(dir); err == nil {
						err = d.Sync()
						d.Close()
					}
				}
				if err == nil {
					err = os.Remove(tmp)
				}
				if err != nil {
					b.Error(err)
					return
				}
				ds = append(ds, time.Since(start))
			}
			lat.add(ds)
		})
	}
	wg.Wait()
	b.StopTimer()
	lat.report(b)
}

// BenchmarkFsync: write size bytes to a new file and fsync it, one at a
// time: the "one fsync" of the latency target.
func BenchmarkFsync(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+size.name, func(b *testing.B) {
			dir := freshRoot(b)
			payload := make([]byte, size.n)
			var lat latencies
			ds := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(size.n))
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(payload); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
			}
			b.StopTimer()
			lat.add(ds)
			lat.report(b)
		})
	}
}
