package hdfs

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// The benchmarks measure the driver's append path against raw HDFS writes
// of the same sizes on the same MiniDFSCluster, in the same run:
//
//	BenchmarkAppend/size=S/raw-create/writers=W  W goroutines each looping
//	        create + write + close of a new file (the client alone: the
//	        least one durable HDFS write costs)
//	BenchmarkAppend/size=S/raw-put/writers=W     the same through
//	        Storage.PutIfAbsent (temp directory, write, close, rename)
//	BenchmarkAppend/size=S/append/streams=N/linger=L/inflight=I
//	        N streams on one Store, each keeping I appends outstanding
//
// Each reports MB/s (SetBytes), p50-ms and p99-ms of single appends or
// writes, and files/GiB: HDFS files created per GiB of payload (each file
// costs the NameNode an inode and a block; a put-if-absent object is a
// directory too). Results: docs/benchmarks.md, "hdfs driver".

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

// reportFiles adds files/GiB: files created per GiB of payload.
func reportFiles(b *testing.B, files, payloadBytes int64) {
	if payloadBytes > 0 {
		b.ReportMetric(float64(files)*float64(1<<30)/float64(payloadBytes), "files/GiB")
	}
}

// split divides n operations among k workers.
func split(n, k, i int) int {
	if i < n%k {
		return n/k + 1
	}
	return n / k
}

// BenchmarkAppend runs, per payload size, the raw loops and then the append
// matrix, so that the numbers compared were taken minutes apart at most on
// a shared machine.
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("size=%s/raw-create/writers=%d", size.name, writers), func(b *testing.B) {
				benchRaw(b, size.n, writers, false)
			})
			b.Run(fmt.Sprintf("size=%s/raw-put/writers=%d", size.name, writers), func(b *testing.B) {
				benchRaw(b, size.n, writers, true)
			})
		}
		for _, streams := range []int{1, 8} {
			for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
				for _, inflight := range []int{1, 32} {
					name := fmt.Sprintf("size=%s/append/streams=%d/linger=%v/inflight=%d", size.name, streams, linger, inflight)
					b.Run(name, func(b *testing.B) { benchAppend(b, size.n, streams, linger, inflight) })
				}
			}
		}
	}
}

// benchAppend: streams streams on one Store, each with a goroutine keeping
// up to inflight appends outstanding (bounded to 32 MiB per stream).
func benchAppend(b *testing.B, size, streams int, linger time.Duration, inflight int) {
	cfg := freshConfig(b)
	cfg.Engine.Linger = linger
	st, err := NewStorage(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := chunked.NewStore(st, engineOptions(st.cfg))
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
	before := st.RequestStats()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, sm := range sts {
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
					window <- pending{sm.Append(b.Context(), stream.Batch{Count: 1, Payload: payload}), start}
				}
				close(window)
			}()
			for p := range window {
				if _, err := p.f.Wait(b.Context()); err != nil {
					b.Error(err)
					for range window {
					}
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
	reportFiles(b, st.RequestStats().Puts-before.Puts, int64(b.N)*int64(size))
}

// benchRaw: writers goroutines each loop a write of a new file of size
// bytes: Storage.PutIfAbsent (viaPut) or the client's create + write +
// close.
func benchRaw(b *testing.B, size, writers int, viaPut bool) {
	cfg := freshConfig(b)
	cfg.Connections = max(cfg.Connections, writers)
	st, err := NewStorage(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	payload := make([]byte, size)
	var lat latencies
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		n := split(b.N, writers, w)
		c := st.pool.all[w%len(st.pool.all)]
		dir := path.Join(cfg.Root, "raw", strconv.Itoa(w))
		if !viaPut {
			if err := c.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() {
			ds := make([]time.Duration, 0, n)
			for i := range n {
				start := time.Now()
				var err error
				if viaPut {
					err = st.PutIfAbsent(b.Context(), fmt.Sprintf("raw/%d/%020d", w, i), payload)
				} else {
					err = st.writeFile(c, fmt.Sprintf("%s/%020d", dir, i), payload, time.Now().Add(time.Minute))
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
	reportFiles(b, int64(b.N), int64(b.N)*int64(size))
}
