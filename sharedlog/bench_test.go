package sharedlog_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// benchBackend returns an opener of stores on one fresh namespace of the
// driver the benchmarks run on: STRATA_BENCH_DRIVER=memory (default) or nfs
// (a directory under the nfs testbed). Stores it opens are closed when b
// ends.
func benchBackend(b *testing.B) func() *stream.Store {
	b.Helper()
	var open func() (*stream.Store, error)
	switch d := os.Getenv("STRATA_BENCH_DRIVER"); d {
	case "", "memory":
		ns := fmt.Sprintf("bench-%s-%d", b.Name(), time.Now().UnixNano())
		open = func() (*stream.Store, error) { return memory.New(memory.Config{Namespace: ns}), nil }
	case "nfs":
		config := nfsConfig(b)
		open = func() (*stream.Store, error) { return nfs.Open(context.Background(), config) }
	default:
		b.Fatalf("STRATA_BENCH_DRIVER=%q: want memory or nfs", d)
	}
	return func() *stream.Store {
		s, err := open()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func benchStore(b *testing.B) *stream.Store { return benchBackend(b)() }

// benchShapes are the batch shapes of the issue: 1 KiB records in 16 KiB
// and 1 MiB batches.
var benchShapes = []struct {
	name    string
	records int
}{{"16KiB", 16}, {"1MiB", 1024}}

const benchWindow = 64 // appends in flight

func benchBatch(records int) []byte {
	return sharedlogtest.Build(sharedlogtest.BatchSpec{Records: records, ValueSize: 1024 - 16, Timestamp: time.Now().UnixMilli(), Tag: "bench"})
}

func reportRates(b *testing.B, records, bytes int64, d time.Duration) {
	b.ReportMetric(float64(records)/d.Seconds(), "records/s")
	b.ReportMetric(float64(bytes)/d.Seconds()/1e6, "MB/s")
}

// pipeline makes n calls of submit(i), keeping at most window of their
// futures in flight, and waits for all of them with wait.
func pipeline[F any](b *testing.B, n, window int, submit func(i int) F, wait func(F) error) {
	b.Helper()
	inflight := make([]F, 0, window)
	for i := range n {
		if len(inflight) == window {
			if err := wait(inflight[0]); err != nil {
				b.Fatal(err)
			}
			inflight = inflight[1:]
		}
		inflight = append(inflight, submit(i))
	}
	for _, f := range inflight {
		if err := wait(f); err != nil {
			b.Fatal(err)
		}
	}
}

// rawAppends appends n fresh copies of tmpl (records offsets each) to st,
// benchWindow deep.
func rawAppends(b *testing.B, st *stream.Stream, tmpl []byte, records, n int) {
	ctx := context.Background()
	pipeline(b, n, benchWindow,
		func(int) *stream.AppendFuture {
			return st.Append(ctx, stream.Batch{Count: uint32(records), Timestamp: 1, Payload: sharedlogtest.Clone(tmpl)})
		},
		func(f *stream.AppendFuture) error { _, err := f.Result(); return err })
}

// logAppends appends n batches batch(i) to l, window deep.
func logAppends(b *testing.B, l *sharedlog.Log, n, window int, batch func(i int) []byte) {
	ctx := context.Background()
	pipeline(b, n, window,
		func(i int) *sharedlog.AppendFuture { return l.AppendAsync(ctx, batch(i), sharedlog.AppendOptions{}) },
		func(f *sharedlog.AppendFuture) error { _, err := f.Wait(ctx); return err })
}

// openRaw opens the raw stream of a benchmark on s, closed when b ends.
func openRaw(b *testing.B, s *stream.Store) *stream.Stream {
	st, err := s.Open(context.Background(), "raw/data", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// openLog opens the partition of a benchmark on s, closed when b ends.
func openLog(b *testing.B, s *stream.Store) *sharedlog.Log {
	l, err := sharedlog.Open(context.Background(), s, "p", sharedlog.Options{Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkAppend compares raw stream appends with SharedLog appends of the
// same Kafka batches (validation, offset stamping, producer state, index)
// on the same driver, both pipelined benchWindow deep, each with a fresh
// copy of the batch per append (as a broker has a fresh request buffer).
func BenchmarkAppend(b *testing.B) {
	for _, shape := range benchShapes {
		tmpl := benchBatch(shape.records)
		run := func(b *testing.B, appendN func(n int)) {
			b.SetBytes(int64(len(tmpl)))
			start := time.Now()
			b.ResetTimer()
			appendN(b.N)
			b.StopTimer()
			reportRates(b, int64(b.N*shape.records), int64(b.N*len(tmpl)), time.Since(start))
		}
		b.Run("raw/"+shape.name, func(b *testing.B) {
			st := openRaw(b, benchStore(b))
			run(b, func(n int) { rawAppends(b, st, tmpl, shape.records, n) })
		})
		b.Run("sharedlog/"+shape.name, func(b *testing.B) {
			l := openLog(b, benchStore(b))
			run(b, func(n int) { logAppends(b, l, n, benchWindow, func(int) []byte { return sharedlogtest.Clone(tmpl) }) })
		})
	}
}

// BenchmarkRead compares raw stream fetches with SharedLog reads (1 MiB per
// fetch) over a prefilled 64 MiB log.
func BenchmarkRead(b *testing.B) {
	const fill = 64 << 20
	for _, shape := range benchShapes {
		tmpl := benchBatch(shape.records)
		n := fill / len(tmpl)
		run := func(b *testing.B, read func(off int64) (next int64, bytes int64)) {
			var bytes, recs int64
			end := int64(n * shape.records)
			off := int64(0)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if off >= end {
					off = 0
				}
				next, nb := read(off)
				bytes += nb
				recs += next - off
				off = next
			}
			b.StopTimer()
			reportRates(b, recs, bytes, time.Since(start))
		}
		b.Run("raw/"+shape.name, func(b *testing.B) {
			st := openRaw(b, benchStore(b))
			rawAppends(b, st, tmpl, shape.records, n)
			run(b, func(off int64) (int64, int64) { return rawFetch(b, st, off) })
		})
		b.Run("sharedlog/"+shape.name, func(b *testing.B) {
			l := openLog(b, benchStore(b))
			logAppends(b, l, n, benchWindow, func(int) []byte { return sharedlogtest.Clone(tmpl) })
			run(b, func(off int64) (int64, int64) { return logRead(b, l, off) })
		})
	}
}

// rawFetch fetches up to 1 MiB of st from off and returns the offset after
// it and the bytes read.
func rawFetch(b *testing.B, st *stream.Stream, off int64) (int64, int64) {
	bs, err := st.Fetch(context.Background(), off, stream.NoEnd, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, x := range bs {
		n += int64(len(x.Payload))
	}
	return bs[len(bs)-1].EndOffset(), n
}

// logRead reads up to 1 MiB of l from off and returns the offset after it
// and the bytes read.
func logRead(b *testing.B, l *sharedlog.Log, off int64) (int64, int64) {
	r, err := l.Read(context.Background(), off, sharedlog.ReadOptions{MaxBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, x := range r.Batches {
		n += int64(len(x))
	}
	return nextOffset(r.Batches[len(r.Batches)-1]), n
}

// BenchmarkRecovery measures a takeover: a new owner opening (higher
// epoch, another store on the namespace) a partition whose old owner wrote
// STRATA_BENCH_RECOVERY_MIB MiB (default 1024) in 1 MiB batches after one
// batch from each of STRATA_BENCH_PRODUCERS producer ids (default 100,000),
// and was then abandoned without Close (background checkpoints only).
func BenchmarkRecovery(b *testing.B) {
	ctx := context.Background()
	mib := envInt("STRATA_BENCH_RECOVERY_MIB", 1024)
	producers := envInt("STRATA_BENCH_PRODUCERS", 100_000)
	open := benchBackend(b)
	old, err := sharedlog.Open(ctx, open(), "p", sharedlog.Options{Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	tmpl := sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, ValueSize: 100, Idempotent: true})
	big := benchBatch(1024)
	logAppends(b, old, producers+mib, 256, func(i int) []byte {
		if i < producers {
			return sharedlogtest.SetProducer(sharedlogtest.Clone(tmpl), int64(i), 0, 0)
		}
		return sharedlogtest.Clone(big)
	})
	hw := old.HighWatermark()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s2 := open()
		start := time.Now()
		l, err := sharedlog.Open(ctx, s2, "p", sharedlog.Options{Epoch: int32(2 + i)})
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		rs := l.Recovery()
		if l.HighWatermark() != hw || rs.Producers != producers {
			b.Fatalf("recovered high watermark %d (want %d), %d producers (want %d)", l.HighWatermark(), hw, rs.Producers, producers)
		}
		b.ReportMetric(d.Seconds()*1000, "ms/recovery")
		b.ReportMetric(float64(rs.ReplayedBytes)/(1<<20), "MiB-replayed")
		b.ReportMetric(float64(rs.ReplayedBatches), "batches-replayed")
		// l is abandoned without Close: the next round fences it.
	}
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// nextOffset is the offset after a stored batch (base offset plus last
// offset delta plus one), read from its header without validating it.
func nextOffset(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:]))) + 1
}

// BenchmarkParseBatch measures the validation of a 1 MiB batch of 1 KiB
// records (header, CRC32C over attributes..end, and the record walk), the
// CPU SharedLog adds to an append on top of the stream's own work.
func BenchmarkParseBatch(b *testing.B) {
	tmpl := benchBatch(1024)
	b.SetBytes(int64(len(tmpl)))
	for b.Loop() {
		if _, err := sharedlog.ParseBatch(tmpl); err != nil {
			b.Fatal(err)
		}
	}
}
