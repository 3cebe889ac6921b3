package sharedlog_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOverhead interleaves rounds of raw stream appends and SharedLog
// appends of the same batches on one driver (b.N rounds of 256 appends
// each, raw then sharedlog, pipelined benchWindow deep), so that a noisy
// machine slows both alike, and reports the median ratio of SharedLog to
// raw throughput by wall time ("wall-ratio") and by process CPU time
// ("cpu-ratio"; 1.0 means no overhead, 0.9 is the target floor).
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	const perRound = 256
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			tmpl := benchBatch(shape.records)
			open := benchBackend(b)
			raw, err := open().Open(ctx, "raw/data", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			l, err := sharedlog.Open(ctx, open(), "p", sharedlog.Options{Epoch: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			rawRound := func() {
				var window []*stream.AppendFuture
				for range perRound {
					if len(window) == benchWindow {
						if _, err := window[0].Result(); err != nil {
							b.Fatal(err)
						}
						window = window[1:]
					}
					window = append(window, raw.Append(ctx, stream.Batch{Count: uint32(shape.records), Timestamp: 1, Payload: sharedlogtest.Clone(tmpl)}))
				}
				for _, f := range window {
					if _, err := f.Result(); err != nil {
						b.Fatal(err)
					}
				}
				// Keep memory flat: drop what this round wrote.
				if err := raw.Trim(ctx, raw.NextOffset()); err != nil {
					b.Fatal(err)
				}
			}
			logRound := func() {
				var window []*sharedlog.AppendFuture
				for range perRound {
					if len(window) == benchWindow {
						if _, err := window[0].Wait(ctx); err != nil {
							b.Fatal(err)
						}
						window = window[1:]
					}
					window = append(window, l.AppendAsync(ctx, sharedlogtest.Clone(tmpl), sharedlog.AppendOptions{}))
				}
				for _, f := range window {
					if _, err := f.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := l.DeleteRecords(ctx, -1); err != nil {
					b.Fatal(err)
				}
			}
			measure := func(f func()) (wall, cpu time.Duration) {
				c0, t0 := cpuTime(), time.Now()
				f()
				return time.Since(t0), cpuTime() - c0
			}
			var wallRatios, cpuRatios []float64
			var rawWall, logWall time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rw, rc := measure(rawRound)
				lw, lc := measure(logRound)
				rawWall += rw
				logWall += lw
				wallRatios = append(wallRatios, float64(rw)/float64(lw))
				cpuRatios = append(cpuRatios, float64(rc)/float64(lc))
			}
			b.StopTimer()
			slices.Sort(wallRatios)
			slices.Sort(cpuRatios)
			bytes := float64(b.N * perRound * len(tmpl))
			b.ReportMetric(bytes/rawWall.Seconds()/1e6, "raw-MB/s")
			b.ReportMetric(bytes/logWall.Seconds()/1e6, "sharedlog-MB/s")
			b.ReportMetric(float64(b.N*perRound*shape.records)/logWall.Seconds(), "sharedlog-records/s")
			b.ReportMetric(wallRatios[len(wallRatios)/2], "wall-ratio")
			b.ReportMetric(cpuRatios[len(cpuRatios)/2], "cpu-ratio")
		})
	}
}
