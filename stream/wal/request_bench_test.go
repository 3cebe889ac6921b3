package wal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
)

// BenchmarkRequestWAL times what a saturating producer's Produce request
// waits for on the embedded default's stream sets (nfs on a local
// directory, fsync on, WALs in a LogStore as strata serve keeps them): 16
// virtual streams each take one 512 KiB append, each checksummed first as
// sharedlog checksums a Kafka batch, and the request is done when all 16
// are durable. Without the client, the socket and the Kafka decoding
// around it, this is the WAL's part of bench/streamsets' walfilessat
// cycle. Requests start every 25 ms at most, 335 MB/s, about the rate of
// walfilessat's saturating runs, so compaction has that much to copy, as
// in a broker. Streams are trimmed to their last 64 MiB, so GC runs too.
// Each setting runs in its own directory, closed before the next starts
// (a setting's compaction would slow the next).
// Sub-benchmarks:
//
//	logstore    the 16 appends to one stream of the LogStore alone: the
//	            floor, no compaction
//	defaults    strata serve's nfs settings (docs/streamsets.md, "Defaults")
//	nolinger    no wait between WAL batches, up to 64 in flight: every
//	            append goes to the LogStore at once, whose writer groups
//	            what queued while it wrote
//	flush16MiB  a request's appends in one WAL batch
//	nocompact   the defaults, compaction held off (CompactBytes 4 GiB):
//	            what compaction's writes add to the WAL's
//
// Each reports its requests' p50 and mean in µs. Run, with -count for
// rounds (settings then interleave round by round):
//
//	go test ./stream/wal -run '^$' -bench RequestWAL -benchtime 200x -count 2 -cpu 1,2
func BenchmarkRequestWAL(b *testing.B) {
	const (
		streams = 16
		size    = 512 << 10
		keep    = 64 << 20
		// pace is the interval between requests' starts: 8 MiB every 25
		// ms is 335 MB/s, the rate of walfilessat's saturating runs.
		pace = 25 * time.Millisecond
	)
	payloads := make([][]byte, streams)
	for j := range payloads {
		payloads[j] = make([]byte, size)
		for k := range payloads[j] {
			payloads[j][k] = byte(rand.Uint32())
		}
	}
	// request appends one payload to each of vs (to vs[0] only, all of
	// them, when vs has one stream), waits for all and trims the streams
	// to about keep bytes.
	request := func(ctx context.Context, vs []*stream.Stream) error {
		fs := make([]*stream.AppendFuture, streams)
		for j, p := range payloads {
			fs[j] = vs[j%len(vs)].Append(ctx, stream.Batch{Count: 1, Payload: p, PayloadChecksum: stream.Checksum(p), PayloadChecksumSet: true})
		}
		for j, f := range fs {
			r, err := f.Wait(ctx)
			if err != nil {
				return err
			}
			// Each stream is trimmed once in 16 requests.
			if lag := int64(keep / size); r.NextOffset > lag && r.NextOffset%int64(16*streams/len(vs)) == 0 {
				if err := vs[j%len(vs)].Trim(ctx, r.NextOffset-lag); err != nil {
					return fmt.Errorf("trim: %w", err)
				}
			}
		}
		return nil
	}
	run := func(b *testing.B, vs []*stream.Stream) {
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		next := time.Now()
		for range b.N {
			time.Sleep(time.Until(next))
			t0 := time.Now()
			next = t0.Add(pace)
			if err := request(ctx, vs); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportLatencies(b, "", lat)
		b.ReportMetric(0, "ns/op")
	}
	b.Run("logstore", func(b *testing.B) {
		ls, err := nfs.OpenLogStore(b.TempDir(), nfs.LogOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer ls.Close()
		st, err := ls.Open(context.Background(), "raw", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			b.Fatal(err)
		}
		run(b, []*stream.Stream{st})
	})
	for _, s := range []struct {
		name string
		opts Options
	}{
		{"defaults", Options{FlushWhenIdle: true, CompactParallelism: 1}},
		{"nolinger", Options{Linger: -1, FlushWhenIdle: true, CompactParallelism: 1, MaxInflightFlushes: 64}},
		{"flush16MiB", Options{FlushWhenIdle: true, CompactParallelism: 1, MaxFlushBytes: 16 << 20}},
		{"nocompact", Options{FlushWhenIdle: true, CompactParallelism: 1, CompactBytes: 4 << 30}},
	} {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			base, err := nfs.Open(ctx, []byte("root: "+filepath.Join(dir, "data")+"\ncreate_root: true\n"))
			if err != nil {
				b.Fatal(err)
			}
			ls, err := nfs.OpenLogStore(filepath.Join(dir, "wal"), nfs.LogOptions{})
			if err != nil {
				b.Fatal(err)
			}
			opts := s.opts
			opts.WALStore = ls
			ws, err := NewStore(base, opts)
			if err != nil {
				b.Fatal(err)
			}
			vstore := stream.NewStore(ws)
			defer vstore.Close()
			vs := make([]*stream.Stream, streams)
			for j := range vs {
				if vs[j], err = vstore.Open(ctx, "p"+strconv.Itoa(j), stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err != nil {
					b.Fatal(err)
				}
			}
			run(b, vs)
		})
	}
}

// reportLatencies reports the p50 and the mean of d (sorted in place) in
// µs, as metrics prefix+"p50-µs" and prefix+"mean-µs".
func reportLatencies(b *testing.B, prefix string, d []time.Duration) {
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64((sum / time.Duration(len(d))).Microseconds()), prefix+"mean-µs")
}
