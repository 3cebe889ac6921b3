package azure

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream/chunked"
)

// The benchmarks measure the driver's append path against a raw upload
// loop of the same sizes on the same Azurite, in the same run:
//
//	BenchmarkAppend/size=S/raw     writers each looping a put-if-absent
//	                               block blob upload of one payload
//	BenchmarkAppend/size=S/append  streams × linger × in-flight appends
//	                               per stream, same payload size
//
// Each reports MB/s (SetBytes), p50-ms and p99-ms of single appends or
// uploads, req/GiB: HTTP requests (every kind, retries included) per GiB
// of payload, put/GiB: the PUTs among them, and list: the LIST requests.
// Results and analysis: docs/benchmarks.md, "azure driver".

// BenchmarkAppend runs, per payload size, the raw upload loop and then the
// append matrix, so that the numbers compared were taken minutes apart at
// most on a shared machine.
func BenchmarkAppend(b *testing.B) {
	for _, size := range drivertest.BenchSizes {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("size=%s/raw/writers=%d", size.Name, writers), func(b *testing.B) {
				benchRaw(b, size.N, writers)
			})
		}
		for _, streams := range []int{1, 8} {
			for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
				for _, inflight := range []int{1, 32} {
					name := fmt.Sprintf("size=%s/append/streams=%d/linger=%v/inflight=%d", size.Name, streams, linger, inflight)
					b.Run(name, func(b *testing.B) { benchAppend(b, size.N, streams, linger, inflight) })
				}
			}
		}
	}
}

// benchAppend: streams streams on one Store, each keeping up to inflight
// appends outstanding (bounded to 32 MiB per stream).
func benchAppend(b *testing.B, size, streams int, linger time.Duration, inflight int) {
	cfg := freshConfig(b)
	cfg.Engine.Linger = linger
	st, err := OpenStorage(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := chunked.NewStore(st, engineOptions(st.cfg))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	sts := drivertest.OpenStreams(b, s, streams)
	before := st.RequestStats()
	drivertest.Appends(b, sts, make([]byte, size), min(inflight, (32<<20)/size))
	drivertest.ReportRequests(b, before, st.RequestStats(), int64(b.N)*int64(size))
}

// benchRaw: writers goroutines each loop PutIfAbsent of a new blob, the
// least one chunk upload costs.
func benchRaw(b *testing.B, size, writers int) {
	st, err := OpenStorage(b.Context(), freshConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	payload := make([]byte, size)
	before := st.RequestStats()
	drivertest.Ops(b, size, writers, func(w, i int) error {
		return st.PutIfAbsent(b.Context(), fmt.Sprintf("raw/%d/%020d", w, i), payload)
	})
	drivertest.ReportRequests(b, before, st.RequestStats(), int64(b.N)*int64(size))
}
