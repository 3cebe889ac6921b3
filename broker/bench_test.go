package broker

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/drivers/s3"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
)

// BenchmarkKgoNFS is the broker benchmark of docs/benchmarks.md: a kgo
// producer (1 KiB records, acks=all, idempotent, 16 partitions) and a kgo
// consumer against a broker on the nfs driver (fsync on) in a local
// directory ($STRATA_BENCH_DIR, default a temp dir). It reports produce
// throughput, produce latency (Produce call to ack, p50/p99) and
// end-to-end latency (Produce call to the consumer receiving it, p50/p99).
// b.N is the number of records (at most ten seconds' worth when paced). "max" produces as fast as the client can
// (8192 records buffered), "rate=1000" paces 1,000 records/s to show
// latency without client-side queueing.
func BenchmarkKgoNFS(b *testing.B) {
	dir := os.Getenv("STRATA_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else {
		var err error
		if dir, err = os.MkdirTemp(dir, "strata-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	st, err := nfs.Open(context.Background(), []byte(fmt.Sprintf("root: %s\ncreate_root: true\n", dir)))
	if err != nil {
		b.Fatal(err)
	}
	benchBroker(b, st)
}

// BenchmarkKgoMinIO is BenchmarkKgoNFS on the s3 driver against the MinIO
// testbed (testbed/up minio), under a fresh prefix.
func BenchmarkKgoMinIO(b *testing.B) {
	benchBroker(b, minioStore(b, "bench/broker-"+rand.Text()[:10]+"/"))
}

// minioStore opens the s3 driver on the MinIO testbed (testbed/up minio)
// under prefix.
func minioStore(tb testing.TB, prefix string) *stream.Store {
	tb.Helper()
	env, err := testbed.Env("minio", "STRATA_S3_CONFIG")
	if err != nil {
		tb.Fatalf("MinIO testbed: %v", err)
	}
	raw, err := os.ReadFile(env["STRATA_S3_CONFIG"])
	if err != nil {
		tb.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		tb.Fatal(err)
	}
	cfg["prefix"] = prefix
	raw, _ = yaml.Marshal(cfg)
	st, err := s3.Open(context.Background(), raw)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// BenchmarkTakeoverMinIO measures a takeover on the s3 driver against the
// MinIO testbed: a broker with 24 partitions (4 topics of 6), each with 60
// appends (60 chunks), is closed ("clean") or abandoned as a crashed
// broker would be ("crash"), and a new broker, on a store of its own (cold
// cache, as another process), takes the cluster over. It reports the
// backend requests New made (ns/op is New's time); run it with
// -benchtime=1x (each iteration builds a cluster of its own).
func BenchmarkTakeoverMinIO(b *testing.B) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "crash"}[clean]
		b.Run(name, func(b *testing.B) {
			var req stream.RequestStats
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				prefix := "bench/takeover-" + rand.Text()[:10] + "/"
				st := minioStore(b, prefix)
				a, addr := startBroker(b, st, nil)
				cl := newClient(b, addr)
				for t := 0; t < 4; t++ {
					topic := fmt.Sprintf("takeover-%d", t)
					createTopic(b, cl, topic, 6, nil)
					for r := 0; r < 60; r++ {
						produceN(b, cl, topic, 12, 100) // about one batch per partition
					}
				}
				cl.Close()
				if clean {
					_ = a.Close()
				}
				st2 := minioStore(b, prefix)
				before := backendStats(b, st2)
				b.StartTimer()
				nb, err := New(context.Background(), Config{Store: st2, Advertise: "127.0.0.1:1", Logger: testLogger(b)})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				req = req.Add(backendStats(b, st2).Sub(before))
				_ = nb.Close()
				_ = a.Close()
				_ = st2.Close()
				_ = st.Close()
			}
			n := float64(b.N)
			b.ReportMetric(float64(req.Gets)/n, "GETs/op")
			b.ReportMetric(float64(req.Puts)/n, "PUTs/op")
			b.ReportMetric(float64(req.Lists)/n, "LISTs/op")
		})
	}
}

// backendStats reads st's request counts.
func backendStats(tb testing.TB, st *stream.Store) stream.RequestStats {
	tb.Helper()
	v, err := st.BackendStats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// benchBroker runs the max and paced benchmarks on a broker on st.
func benchBroker(b *testing.B, st *stream.Store) {
	b.Cleanup(func() { _ = st.Close() })
	_, addr := startBroker(b, st, nil)
	b.Run("max", func(b *testing.B) { benchKgo(b, addr, 0) })
	b.Run("rate=1000", func(b *testing.B) { benchKgo(b, addr, 1000) })
}

var benchTopics int

func benchKgo(b *testing.B, addr string, rate int) {
	admin := newClient(b, addr)
	benchTopics++
	topic := fmt.Sprintf("bench-%d", benchTopics)
	createTopic(b, admin, topic, 16, nil)
	defer deleteTopic(b, admin, topic)

	const size = 1024
	n := max(b.N, 1000)
	if rate > 0 {
		n = min(n, 10*rate) // ten seconds of paced load
	}
	prod := newClient(b, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(8192))
	cons := newClient(b, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(100*time.Millisecond))
	// Wait until the consumer has its partitions.
	warm, cancelWarm := context.WithTimeout(context.Background(), time.Second)
	cons.PollFetches(warm)
	cancelWarm()

	var (
		mu      sync.Mutex
		prodLat = make([]time.Duration, 0, n)
		e2eLat  = make([]time.Duration, 0, n)
		failed  error
	)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		got := 0
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for got < n && ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				sent := int64(binary.BigEndian.Uint64(r.Value))
				mu.Lock()
				e2eLat = append(e2eLat, now.Sub(time.Unix(0, sent)))
				mu.Unlock()
				got++
			})
		}
	}()
	payload := make([]byte, size)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	for i := 0; i < n; i++ {
		if tick != nil {
			<-tick.C
		}
		v := make([]byte, size)
		copy(v, payload)
		t0 := time.Now()
		binary.BigEndian.PutUint64(v, uint64(t0.UnixNano()))
		wg.Add(1)
		prod.Produce(context.Background(), &kgo.Record{Topic: topic, Value: v}, func(r *kgo.Record, err error) {
			d := time.Since(t0)
			mu.Lock()
			if err != nil && failed == nil {
				failed = err
			}
			prodLat = append(prodLat, d)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	<-consumed
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(e2eLat) < n {
		b.Fatalf("consumed %d of %d", len(e2eLat), n)
	}
	pct := func(ds []time.Duration, p float64) float64 {
		slices.Sort(ds)
		return float64(ds[int(float64(len(ds)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(n*size)/elapsed.Seconds()/(1<<20), "MiB/s")
	b.ReportMetric(pct(prodLat, 0.50), "produce-p50-ms")
	b.ReportMetric(pct(prodLat, 0.99), "produce-p99-ms")
	b.ReportMetric(pct(e2eLat, 0.50), "e2e-p50-ms")
	b.ReportMetric(pct(e2eLat, 0.99), "e2e-p99-ms")
}
