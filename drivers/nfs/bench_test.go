package nfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
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
//	raw direct   raw, with the block-aligned bulk written with O_DIRECT as
//	             the driver does for puts of DirectMinBytes or more (only
//	             at those sizes)
//	fsync        per writer: write a new file + fsync ("one fsync")
//	file append  per writer: write at the end of a preallocated file +
//	             fdatasync: no new file, no directory entry, what a WAL
//	             kept in one file per session would pay (not a put: the
//	             floor such a design would have, for comparison; Linux)
//	Storage.PutIfAbsent  per writer: the driver's Storage alone, no engine
//	append       the driver: linger 0 / 2ms; one append at a time per
//	             stream (inflight=1), or pipelined: drivertest.PipelinedBytes
//	             (8 MiB) of payload outstanding per stream (inflight=8192 at
//	             1 KiB, 128 at 64 KiB, 8 at 1 MiB; STRATA_BENCH_INFLIGHT
//	             caps it). Until 2026-11-30 it was 32 appends, at most
//	             32 MiB: 512 MiB queued at 1 MiB with 16 streams, more than
//	             a slice's worth, so that row measured filling and draining.
//
// with as many writers as streams (STRATA_BENCH_SIZES and
// STRATA_BENCH_STREAMS, comma-separated, narrow the matrix;
// STRATA_BENCH_ROUNDS sets the rounds, default 8), and prints MB/s, p50
// and p99 of single operations, the process's CPU time per operation, and
// MB/s as a share of raw. STRATA_BENCH_OUT names a file to write the table
// to as well. Results: docs/benchmarks.md.
func BenchmarkCompare(b *testing.B) {
	table := drivertest.NewTable([]string{"raw", "raw+dirsync", "raw direct"})
	drivertest.Compare(b, table, []int{1 << 10, 64 << 10, 1 << 20}, []int{1, 16}, func(size, streams int) []*drivertest.Kind {
		return compareKinds(b, size, streams)
	})
}

// compareKinds is one group of BenchmarkCompare: size-byte payloads,
// streams streams (and as many raw writers), each kind in a directory of
// its own under a fresh root. Each kind's directory is removed when the
// group ends (a whole run writes more than 50 GB at 1-2 GB/s).
func compareKinds(b *testing.B, size, streams int) []*drivertest.Kind {
	root := freshRoot(b)
	payload := alignedBytes(size, 4096, 0)
	kind := func(name, dir string, of []*drivertest.Kind, run func(dir string) (drivertest.Runner, func())) *drivertest.Kind {
		dir = filepath.Join(root, dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		r, release := run(dir)
		return &drivertest.Kind{Name: name, Run: r, Of: of, Close: func() {
			if release != nil {
				release()
			}
			if err := os.RemoveAll(dir); err != nil {
				b.Error(err)
			}
			syscall.Sync() // the freed blocks' discards, before the next group
		}}
	}
	rawKind := func(name, dir string, mode rawMode) *drivertest.Kind {
		return kind(name, dir, nil, func(dir string) (drivertest.Runner, func()) {
			return rawRunner(b, dir, payload, streams, mode), nil
		})
	}
	raw, rawSync := rawKind("raw", "raw", rawPlain), rawKind("raw+dirsync", "rawsync", rawDirSync)
	refs := []*drivertest.Kind{raw, rawSync, nil}
	kinds := []*drivertest.Kind{raw, rawSync}
	if size >= DirectMinBytes {
		refs[2] = rawKind("raw direct", "rawdirect", rawDirect)
		kinds = append(kinds, refs[2])
	}
	kinds = append(kinds,
		kind("fsync", "fsync", nil, func(dir string) (drivertest.Runner, func()) {
			return fsyncRunner(b, dir, payload, streams), nil
		}),
		kind("Storage.PutIfAbsent", "storage", refs, func(dir string) (drivertest.Runner, func()) {
			return storageRunner(b, dir, payload, streams)
		}),
	)
	if fileAppendRunner != nil {
		kinds = append(kinds, kind("file append", "fileappend", nil, func(dir string) (drivertest.Runner, func()) {
			return fileAppendRunner(b, dir, payload, streams)
		}))
	}
	for _, linger := range []time.Duration{0, 2 * time.Millisecond} {
		for _, inflight := range []int{1, drivertest.PipelineDepth(size)} {
			name := fmt.Sprintf("append linger=%v inflight=%d", linger, inflight)
			kinds = append(kinds, kind(name, fmt.Sprintf("l%vi%d", linger, inflight), refs, func(dir string) (drivertest.Runner, func()) {
				return appendRunner(b, dir, payload, streams, linger, inflight)
			}))
		}
	}
	return kinds
}

// rawMode is what a raw loop adds to write temp + fsync + link.
type rawMode int

const (
	rawPlain   rawMode = iota
	rawDirSync         // fsync of the directory after the link
	rawDirect          // the block-aligned bulk written with O_DIRECT
)

// rawRunner: each writer loops write temp + fsync + close + link to a new
// name + unlink temp (and what mode adds), in a directory of its own, as
// the driver does for each chunk.
func rawRunner(b testing.TB, dir string, payload []byte, writers int, mode rawMode) drivertest.Runner {
	for w := range writers {
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(w)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
		return rawPut(filepath.Join(dir, strconv.Itoa(w)), strconv.Itoa(seq), payload, mode)
	})
}

// writeSynced creates path (which must not exist), writes payload (the
// 4 KiB-aligned bulk with O_DIRECT when direct), fsyncs and closes it.
func writeSynced(path string, payload []byte, direct bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	rest := payload
	if direct {
		bulk := len(payload) &^ 4095
		_, err = writeDirect(f, payload[:bulk])
		rest = payload[bulk:]
	}
	if err == nil {
		_, err = f.Write(rest)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func rawPut(dir, name string, payload []byte, mode rawMode) error {
	tmp := filepath.Join(dir, "t")
	err := writeSynced(tmp, payload, mode == rawDirect)
	if err == nil {
		err = os.Link(tmp, filepath.Join(dir, name))
	}
	if err == nil && mode == rawDirSync {
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
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
		return writeSynced(filepath.Join(dir, fmt.Sprintf("%d-%d", w, seq)), payload, false)
	})
}

// storageRunner: each writer loops Storage.PutIfAbsent of new keys of its
// own: the driver without the engine. The func closes the Storage.
func storageRunner(b testing.TB, root string, payload []byte, writers int) (drivertest.Runner, func()) {
	st, err := openStorage(b.Context(), configFor(root))
	if err != nil {
		b.Fatal(err)
	}
	return drivertest.LoopRunner(b, len(payload), writers, func(w, seq int) error {
		return st.PutIfAbsent(b.Context(), fmt.Sprintf("w%d/c/%020d", w, seq), payload)
	}), func() { st.Close() }
}

// appendRunner: a Store on its own directory with streams streams; each
// stream's goroutine keeps up to inflight appends outstanding until the
// deadline, then waits for the rest. Latency is from Append to ack. The
// func closes the Store.
func appendRunner(b *testing.B, root string, payload []byte, streams int, linger time.Duration, inflight int) (drivertest.Runner, func()) {
	s, err := Open(b.Context(), configFor(root, "linger: "+linger.String()))
	if err != nil {
		b.Fatal(err)
	}
	return drivertest.AppendRunner(b, drivertest.OpenStreams(b, s, streams), payload, inflight), func() { s.Close() }
}

// BenchmarkReadAfterWrite reads back, through a new Store (so that the
// engine's cache is cold), 512 MiB of 1 MiB appends written just before,
// with direct_io on and off: what direct writes cost a reader that
// catches up on fresh data on the same host, whose page cache they skip.
//
//	go test -run '^$' -bench ReadAfterWrite -benchtime 3x ./drivers/nfs/
func BenchmarkReadAfterWrite(b *testing.B) {
	payload := alignedBytes(1<<20, 4096, 0)
	for _, direct := range []bool{true, false} {
		b.Run(fmt.Sprintf("direct_io=%v", direct), func(b *testing.B) {
			var read int64
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				root := freshRoot(b)
				config := configFor(root, fmt.Sprintf("direct_io: %v", direct))
				writeStream(b, config, payload, 512)
				b.StartTimer()
				start := time.Now()
				read += readStream(b, config)
				took += time.Since(start)
				b.StopTimer()
				os.RemoveAll(root)
				b.StartTimer()
			}
			b.ReportMetric(float64(read)/took.Seconds()/1e6, "read-MB/s")
		})
	}
}

// writeStream appends n copies of payload to stream "r" of a new Store on
// config, 16 in flight, and closes it.
func writeStream(b *testing.B, config []byte, payload []byte, n int) {
	s, err := Open(b.Context(), config)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(b.Context(), "r", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var inflight []*stream.AppendFuture
	for i := range n {
		inflight = append(inflight, st.Append(b.Context(), stream.Batch{Count: 1, Payload: payload}))
		if len(inflight) == 16 || i == n-1 {
			for _, f := range inflight {
				if _, err := f.Wait(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			inflight = inflight[:0]
		}
	}
}

// readStream reads all of stream "r" through a new Store on config (a new
// owner, so its cache starts empty) and returns the payload bytes read.
func readStream(b *testing.B, config []byte) int64 {
	s, err := Open(b.Context(), config)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r, err := s.Open(b.Context(), "r", stream.OpenOptions{Epoch: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	log, err := readLog(b, r)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, x := range log {
		n += int64(len(x.Payload))
	}
	return n
}

// fileAppendRunner, where the platform has fallocate and fdatasync
// (fileappend_linux_test.go), runs BenchmarkCompare's "file append" kind.
var fileAppendRunner func(b testing.TB, dir string, payload []byte, writers int) (drivertest.Runner, func())
