package sharedlog_test

import (
	"context"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/sharedlog/sharedlogtest"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// roundBytes is about what one round of BenchmarkOverhead appends: long
// enough that what a round does once (the trim after it, the collection
// before it) does not weigh on its throughput.
const roundBytes = 64 << 20

// BenchmarkOverhead interleaves rounds of raw stream appends and SharedLog
// appends of the same batches on one driver (b.N rounds of 256 appends or
// roundBytes each, whichever is more, raw and sharedlog in alternating
// order, pipelined benchWindow deep), so that a noisy
// machine slows both alike, and reports the median ratio of SharedLog to
// raw throughput by wall time ("wall-ratio") and by process CPU time
// ("cpu-ratio"; 1.0 means no overhead, 0.9 is the target floor).
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			tmpl := benchBatch(shape.records)
			perRound := max(256, roundBytes/len(tmpl))
			open := benchBackend(b)
			raw, l := openRaw(b, open()), openLog(b, open())
			rawRound := func() {
				rawAppends(b, raw, tmpl, shape.records, perRound)
				// Keep memory flat: drop what this round wrote.
				if err := raw.Trim(ctx, raw.NextOffset()); err != nil {
					b.Fatal(err)
				}
			}
			logRound := func() {
				logAppends(b, l, perRound, benchWindow, func(int) []byte { return sharedlogtest.Clone(tmpl) })
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
	const fill = 64 << 20
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			tmpl := benchBatch(shape.records)
			n := fill / len(tmpl)
			open := benchBackend(b)
			raw, l := openRaw(b, open()), openLog(b, open())
			rawAppends(b, raw, tmpl, shape.records, n)
			logAppends(b, l, n, benchWindow, func(int) []byte { return sharedlogtest.Clone(tmpl) })
			end := l.HighWatermark()
			rawRound := func() {
				for off := int64(0); off < end; {
					off, _ = rawFetch(b, raw, off)
				}
			}
			logRound := func() {
				for off := int64(0); off < end; {
					off, _ = logRead(b, l, off)
				}
			}
			reportInterleaved(b, rawRound, logRound, float64(n*len(tmpl)), float64(n*shape.records))
		})
	}
}

// reportInterleaved runs b.N rounds of rawRound and logRound, each moving
// bytes and records, and reports both throughputs and the median ratios.
func reportInterleaved(b *testing.B, rawRound, logRound func(), bytes, records float64) {
	// Each round starts from a collected heap (runtime.GC outside the
	// measured time), so that neither kind pays for the garbage of the
	// round before it, and the order alternates.
	measure := func(kind string, f func()) (wall, cpu time.Duration) {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		pprof.Do(context.Background(), pprof.Labels("round", kind), func(context.Context) {
			c0, t0 := cpuTime(), time.Now()
			f()
			wall, cpu = time.Since(t0), cpuTime()-c0
		})
		return wall, cpu
	}
	var wallRatios, cpuRatios []float64
	var rawWall, logWall time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var rw, rc, lw, lc time.Duration
		if i%2 == 0 {
			rw, rc = measure("raw", rawRound)
			lw, lc = measure("sharedlog", logRound)
		} else {
			lw, lc = measure("sharedlog", logRound)
			rw, rc = measure("raw", rawRound)
		}
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
