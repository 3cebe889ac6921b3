package broker

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/wal"
)

// BenchmarkIdlePartitions measures what an open, idle partition costs a
// broker on the nfs driver (a local directory, fsync off), with stream sets
// on (stream/wal, as strata serve runs by default) and off: each iteration
// creates a topic of $STRATA_BENCH_PARTITIONS partitions (default 2,000) on
// the same broker, and the figures are the growth of the live heap (after
// a GC), of the heap spans in use (what the live heap pins of the process's
// memory), of goroutine stacks and of the goroutine count divided by the
// partitions, as heap-B/partition, spans-B/partition, stack-B/partition and
// goroutines/partition (medians over the iterations).
// With $STRATA_BENCH_HEAPPROFILE set, the heap profile after the last
// iteration is written there (sets-on.pprof, sets-off.pprof), and a
// goroutine profile beside it (.goroutines).
//
//	go test ./broker -run '^$' -bench BenchmarkIdlePartitions -benchtime 3x
func BenchmarkIdlePartitions(b *testing.B) {
	n := 2000
	if v := os.Getenv("STRATA_BENCH_PARTITIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("STRATA_BENCH_PARTITIONS=%q: want a positive count", v)
		}
	}
	if os.Getenv("STRATA_BENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 1
	}
	for _, sets := range []bool{true, false} {
		name := map[bool]string{true: "sets=on", false: "sets=off"}[sets]
		b.Run(name, func(b *testing.B) {
			var st *stream.Store = nfsStore(b, "")
			if sets {
				ws, err := wal.NewStore(st, wal.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = ws.Close() })
				st = stream.NewStore(ws)
			}
			br, _ := startBroker(b, st, func(c *Config) {
				c.MaxPartitions = 1 << 30
				c.MaxPartitionsPerTopic = int32(n)
			})
			var heap, spans, stack, gor []float64
			for i := 0; b.Loop(); i++ {
				m0 := liveHeap()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				_, code, msg := br.catalog.create(ctx, fmt.Sprintf("idle-%d", i), int32(n), nil, false)
				cancel()
				if code != 0 {
					b.Fatalf("creating %d partitions: code %d: %s", n, code, msg)
				}
				m1 := liveHeap()
				heap = append(heap, float64(m1.heap-m0.heap)/float64(n))
				spans = append(spans, float64(m1.spans-m0.spans)/float64(n))
				stack = append(stack, float64(m1.stack-m0.stack)/float64(n))
				gor = append(gor, float64(m1.goroutines-m0.goroutines)/float64(n))
			}
			b.ReportMetric(median(heap), "heap-B/partition")
			b.ReportMetric(median(spans), "spans-B/partition")
			b.ReportMetric(median(stack), "stack-B/partition")
			b.ReportMetric(median(gor), "goroutines/partition")
			if dir := os.Getenv("STRATA_BENCH_HEAPPROFILE"); dir != "" {
				f, err := os.Create(dir + "/" + map[bool]string{true: "sets-on", false: "sets-off"}[sets] + ".pprof")
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
					b.Fatal(err)
				}
				_ = f.Close()
				if f, err = os.Create(dir + "/" + map[bool]string{true: "sets-on", false: "sets-off"}[sets] + ".goroutines"); err == nil {
					_ = pprof.Lookup("goroutine").WriteTo(f, 1)
					_ = f.Close()
				}
			}
		})
	}
}

// memFigures are a process's memory figures after a GC: live heap bytes,
// bytes of heap spans in use (live objects and the free room in their
// spans), bytes of goroutine stacks, and the goroutine count.
type memFigures struct {
	heap, spans, stack int64
	goroutines         int
}

// liveHeap returns the memory figures after a settle and a GC.
func liveHeap() memFigures {
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{int64(ms.HeapAlloc), int64(ms.HeapInuse), int64(ms.StackInuse), runtime.NumGoroutine()}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
