package hdfs

import (
	"fmt"
	"path"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
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

// reportFiles adds files/GiB: files created per GiB of payload.
func reportFiles(b *testing.B, files, payloadBytes int64) {
	if payloadBytes > 0 {
		b.ReportMetric(float64(files)*float64(1<<30)/float64(payloadBytes), "files/GiB")
	}
}

// BenchmarkAppend runs, per payload size, the raw loops and then the append
// matrix, so that the numbers compared were taken minutes apart at most on
// a shared machine.
func BenchmarkAppend(b *testing.B) {
	for _, size := range drivertest.BenchSizes {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("size=%s/raw-create/writers=%d", size.Name, writers), func(b *testing.B) {
				benchRaw(b, size.N, writers, false)
			})
			b.Run(fmt.Sprintf("size=%s/raw-put/writers=%d", size.Name, writers), func(b *testing.B) {
				benchRaw(b, size.N, writers, true)
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
	d := drivertest.EngineAppends(b, st, engineOptions(st.cfg), streams, size, min(inflight, (32<<20)/size))
	reportFiles(b, d.Puts, int64(b.N)*int64(size))
}

// benchRaw: writers goroutines each loop a write of a new file of size
// bytes: Storage.PutIfAbsent (viaPut) or the client's create + write +
// close.
func benchRaw(b *testing.B, size, writers int, viaPut bool) {
	cfg := freshConfig(b)
	cfg.Connections = max(cfg.Connections, writers)
	st, err := OpenStorage(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	payload := make([]byte, size)
	cs := st.pool.all()
	if !viaPut {
		for w := range writers {
			if err := cs[w%len(cs)].MkdirAll(rawDir(cfg, w), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	drivertest.Ops(b, size, writers, func(w, i int) error {
		if viaPut {
			return st.PutIfAbsent(b.Context(), fmt.Sprintf("raw/%d/%020d", w, i), payload)
		}
		c := cs[w%len(cs)]
		return st.writeFile(c, fmt.Sprintf("%s/%020d", rawDir(cfg, w), i), payload, time.Now().Add(time.Minute))
	})
	reportFiles(b, int64(b.N), int64(b.N)*int64(size))
}

// rawDir is the directory of writer w's files in the raw-create loop.
func rawDir(cfg Config, w int) string {
	return path.Join(cfg.Root, "raw", strconv.Itoa(w))
}
