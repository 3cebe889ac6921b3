package nfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// BenchmarkCompare measures the driver's appends against the physical limit
// of the same directory, interleaved in time so that load from elsewhere on
// the machine hits both alike. Run it once:
//
//	go test -run '^$' -bench Compare -benchtime 1x -v ./drivers/nfs/
//
// For each batch size (1 KiB, 64 KiB, 1 MiB) and number of streams (1, 16)
// it runs, in rounds of drivertest.CompareSlice each, alternating:
//
//	raw          per writer: write temp + fsync + close + link(2) + unlink
//	raw+dirsync  the same + fsync of the directory (the driver's durable put)
//	fsync        per writer: write a new file + fsync ("one fsync")
//	Storage.PutIfAbsent  per writer: the driver's Storage alone, no engine
//	append       the driver: linger 0 / 2ms × 1 / 32 appends in flight per stream
//
// with as many writers as streams (STRATA_BENCH_SIZES and
// STRATA_BENCH_STREAMS, comma-separated, narrow the matrix;
// STRATA_BENCH_ROUNDS sets the rounds, default 8), and prints MB/s, p50
// and p99 of single operations, the process's CPU time per operation, and
// MB/s as a share of raw. STRATA_BENCH_OUT names a file to write the table
// to as well. Results: docs/benchmarks.md.
func BenchmarkCompare(b *testing.B) {
	table := drivertest.NewTable([]string{"raw", "raw+dirsync"})
	drivertest.Compare(b, table, []int{1 << 10, 64 << 10, 1 << 20}, []int{1, 16}, func(size, streams int) []*drivertest.Kind {
		return compareKinds(b, size, streams)
	})
}

// compareKinds is one group of BenchmarkCompare: size-byte payloads,
// streams streams (and as many raw writers), each kind in a directory of
// its own under a fresh root.
func compareKinds(b *testing.B, size, streams int) []*drivertest.Kind {
	root := freshRoot(b)
	payload := make([]byte, size)
	raw := &drivertest.Kind{Name: "raw", Run: rawRunner(b, filepath.Join(root, "raw"), payload, streams, false)}
	rawSync := &drivertest.Kind{Name: "raw+dirsync", Run: rawRunner(b, filepath.Join(root, "rawsync"), payload, streams, true)}
	refs := []*drivertest.Kind{raw, rawSync}
	kinds := []*drivertest.Kind{
		raw,
		rawSync,
		{Name: "fsync", Run: fsyncRunner(b, filepath.Join(root, "fsync"), payload, streams)},
		{Name: "Storage.PutIfAbsent", Run: storageRunner(b, filepath.Join(root, "storage"), payload, streams), Of: refs},
	}
	for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
		for _, inflight := range []int{1, 32} {
			kinds = append(kinds, &drivertest.Kind{
				Name: fmt.Sprintf("append linger=%v inflight=%d", linger, inflight),
				Run:  appendRunner(b, filepath.Join(root, fmt.Sprintf("l%vi%d", linger, inflight)), payload, streams, linger, inflight),
				Of:   refs,
			})
		}
	}
	return kinds
}

// rawRunner: each writer loops write temp + fsync + close + link to a new
// name (+ fsync of the directory) + unlink temp, in a directory of its own,
// as the driver does for each chunk.
func rawRunner(b testing.TB, dir string, payload []byte, writers int, dirsync bool) drivertest.Runner {
	for w := range writers {
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(w)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
		return rawPut(filepath.Join(dir, strconv.Itoa(w)), strconv.Itoa(seq), payload, dirsync)
	})
}

// writeSynced creates path (which must not exist), writes payload, fsyncs
// and closes it.
func writeSynced(path string, payload []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(payload)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func rawPut(dir, name string, payload []byte, dirsync bool) error {
	tmp := filepath.Join(dir, "t")
	err := writeSynced(tmp, payload)
	if err == nil {
		err = os.Link(tmp, filepath.Join(dir, name))
	}
	if err == nil && dirsync {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if rerr := os.Remove(tmp); err == nil {
		err = rerr
	}
	return err
}

// fsyncRunner: each writer loops write a new file + fsync + close.
func fsyncRunner(b testing.TB, dir string, payload []byte, writers int) drivertest.Runner {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
		return writeSynced(filepath.Join(dir, fmt.Sprintf("%d-%d", w, seq)), payload)
	})
}

// storageRunner: each writer loops Storage.PutIfAbsent of new keys of its
// own: the driver without the engine.
func storageRunner(b testing.TB, root string, payload []byte, writers int) drivertest.Runner {
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	st, err := openStorage(b.Context(), configFor(root))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
		return st.PutIfAbsent(b.Context(), fmt.Sprintf("w%d/c/%020d", w, seq), payload)
	})
}

// appendRunner: a Store on its own directory with streams streams; each
// stream's goroutine keeps up to inflight appends outstanding (at most
// 32 MiB) until the deadline, then waits for the rest. Latency is from
// Append to ack.
func appendRunner(b *testing.B, root string, payload []byte, streams int, linger time.Duration, inflight int) drivertest.Runner {
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.Context(), configFor(root, "linger: "+linger.String()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	inflight = max(1, min(inflight, (32<<20)/len(payload)))
	return drivertest.AppendRunner(b, drivertest.OpenStreams(b, s, streams), payload, inflight)
}
