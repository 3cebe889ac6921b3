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
func benchBackend(b *testing.B) func() stream.Store {
	b.Helper()
	var open func() (stream.Store, error)
	switch d := os.Getenv("STRATA_BENCH_DRIVER"); d {
	case "", "memory":
		ns := fmt.Sprintf("bench-%s-%d", b.Name(), time.Now().UnixNano())
		open = func() (stream.Store, error) { return memory.New(memory.Config{Namespace: ns}), nil }
	case "nfs":
		config := nfsConfig(b)
		open = func() (stream.Store, error) { return nfs.Open(context.Background(), config) }
	default:
		b.Fatalf("STRATA_BENCH_DRIVER=%q: want memory or nfs", d)
	}
	return func() stream.Store {
		s, err := open()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func benchStore(b *testing.B) stream.Store { return benchBackend(b)() }

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

// BenchmarkAppend compares raw stream appends with SharedLog appends of the
// same Kafka batches (validation, offset stamping, producer state, index)
// on the same driver, both pipelined benchWindow deep, each with a fresh
// copy of the batch per append (as a broker has a fresh request buffer).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	for _, shape := range benchShapes {
		tmpl := benchBatch(shape.records)
		b.Run("raw/"+shape.name, func(b *testing.B) {
			st, err := benchStore(b).Open(ctx, "raw/data", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.SetBytes(int64(len(tmpl)))
			window := make([]*stream.AppendFuture, 0, benchWindow)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if len(window) == benchWindow {
					if _, err := window[0].Result(); err != nil {
						b.Fatal(err)
					}
					window = window[1:]
				}
				window = append(window, st.Append(ctx, stream.Batch{Count: uint32(shape.records), Timestamp: 1, Payload: sharedlogtest.Clone(tmpl)}))
			}
			for _, f := range window {
				if _, err := f.Result(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRates(b, int64(b.N*shape.records), int64(b.N*len(tmpl)), time.Since(start))
		})
		b.Run("sharedlog/"+shape.name, func(b *testing.B) {
			l, err := sharedlog.Open(ctx, benchStore(b), "p", sharedlog.Options{Epoch: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.SetBytes(int64(len(tmpl)))
			window := make([]*sharedlog.AppendFuture, 0, benchWindow)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
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
			b.StopTimer()
			reportRates(b, int64(b.N*shape.records), int64(b.N*len(tmpl)), time.Since(start))
		})
	}
}

// BenchmarkRead compares raw stream fetches with SharedLog reads (1 MiB per
// fetch) over a prefilled 64 MiB log.
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	const fill = 64 << 20
	for _, shape := range benchShapes {
		tmpl := benchBatch(shape.records)
		n := fill / len(tmpl)
		b.Run("raw/"+shape.name, func(b *testing.B) {
			st, err := benchStore(b).Open(ctx, "raw/data", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for range n {
				st.Append(ctx, stream.Batch{Count: uint32(shape.records), Timestamp: 1, Payload: sharedlogtest.Clone(tmpl)})
			}
			if _, err := stream.Append(ctx, st, stream.Batch{Count: 1, Payload: []byte("end")}); err != nil {
				b.Fatal(err)
			}
			var bytes, recs int64
			off := int64(0)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if off >= int64(n*shape.records) {
					off = 0
				}
				bs, err := st.Fetch(ctx, off, int64(n*shape.records), 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				for _, x := range bs {
					bytes += int64(len(x.Payload))
					recs += int64(x.Count)
				}
				off = bs[len(bs)-1].EndOffset()
			}
			b.StopTimer()
			reportRates(b, recs, bytes, time.Since(start))
		})
		b.Run("sharedlog/"+shape.name, func(b *testing.B) {
			l, err := sharedlog.Open(ctx, benchStore(b), "p", sharedlog.Options{Epoch: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			futs := make([]*sharedlog.AppendFuture, n)
			for i := range n {
				futs[i] = l.AppendAsync(ctx, sharedlogtest.Clone(tmpl), sharedlog.AppendOptions{})
			}
			for _, f := range futs {
				if _, err := f.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			var bytes, recs int64
			off, hw := int64(0), l.HighWatermark()
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if off >= hw {
					off = 0
				}
				r, err := l.Read(ctx, off, sharedlog.ReadOptions{MaxBytes: 1 << 20})
				if err != nil {
					b.Fatal(err)
				}
				for _, x := range r.Batches {
					bytes += int64(len(x))
				}
				next := nextOffset(r.Batches[len(r.Batches)-1])
				recs += next - off
				off = next
			}
			b.StopTimer()
			reportRates(b, recs, bytes, time.Since(start))
		})
	}
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
	var window []*sharedlog.AppendFuture
	push := func(batch []byte) {
		if len(window) == 256 {
			if _, err := window[0].Wait(ctx); err != nil {
				b.Fatal(err)
			}
			window = window[1:]
		}
		window = append(window, old.AppendAsync(ctx, batch, sharedlog.AppendOptions{}))
	}
	tmpl := sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, ValueSize: 100, Idempotent: true})
	for pid := range producers {
		push(sharedlogtest.SetProducer(sharedlogtest.Clone(tmpl), int64(pid), 0, 0))
	}
	big := benchBatch(1024)
	for range mib {
		push(sharedlogtest.Clone(big))
	}
	for _, f := range window {
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
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
