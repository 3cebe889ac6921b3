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
			reportInterleaved(b, rawRound, logRound, float64(perRound*len(tmpl)), float64(perRound*shape.records))
		})
	}
}

// BenchmarkReadOverhead interleaves rounds of raw stream fetches and
// SharedLog reads (1 MiB each) over the same 64 MiB of batches on one
// driver and reports the median SharedLog/raw throughput ratio by wall and
// CPU time (one round reads the whole 64 MiB).
func BenchmarkReadOverhead(b *testing.B) {
	ctx := context.Background()
	const fill = 64 << 20
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			tmpl := benchBatch(shape.records)
			n := fill / len(tmpl)
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
			var rawFuts []*stream.AppendFuture
			var logFuts []*sharedlog.AppendFuture
			for range n {
				rawFuts = append(rawFuts, raw.Append(ctx, stream.Batch{Count: uint32(shape.records), Timestamp: 1, Payload: sharedlogtest.Clone(tmpl)}))
				logFuts = append(logFuts, l.AppendAsync(ctx, sharedlogtest.Clone(tmpl), sharedlog.AppendOptions{}))
			}
			for i := range n {
				if _, err := rawFuts[i].Result(); err != nil {
					b.Fatal(err)
				}
				if _, err := logFuts[i].Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			end := l.HighWatermark()
			rawRound := func() {
				for off := int64(0); off < end; {
					bs, err := raw.Fetch(ctx, off, end, 1<<20)
					if err != nil {
						b.Fatal(err)
					}
					off = bs[len(bs)-1].EndOffset()
				}
			}
			logRound := func() {
				for off := int64(0); off < end; {
					r, err := l.Read(ctx, off, sharedlog.ReadOptions{MaxBytes: 1 << 20})
					if err != nil {
						b.Fatal(err)
					}
					off = nextOffset(r.Batches[len(r.Batches)-1])
				}
			}
			reportInterleaved(b, rawRound, logRound, float64(n*len(tmpl)), float64(n*shape.records))
		})
	}
}

// reportInterleaved runs b.N rounds of rawRound then logRound, each moving
// bytes and records, and reports both throughputs and the median ratios.
func reportInterleaved(b *testing.B, rawRound, logRound func(), bytes, records float64) {
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
	total := float64(b.N)
	b.ReportMetric(total*bytes/rawWall.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(total*bytes/logWall.Seconds()/1e6, "sharedlog-MB/s")
	b.ReportMetric(total*records/logWall.Seconds(), "sharedlog-records/s")
	b.ReportMetric(wallRatios[len(wallRatios)/2], "wall-ratio")
	b.ReportMetric(cpuRatios[len(cpuRatios)/2], "cpu-ratio")
}
