package wal

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
)

// BenchmarkAppendLatencyLayers splits the latency of one durable append on
// the embedded default (nfs on a local directory, fsync on) by layer, the
// layers interleaved in slices of 100 appends so that the disk's moods hit
// all alike, one append at a time:
//
//	put      the nfs Storage's PutIfAbsent of 3 KiB (temp file, fsync,
//	         link, directory fsync)
//	engine   a base stream's Append of 3 KiB, linger 0 (the put, then the
//	         R3 probe, then the ack)
//	wal1     one virtual stream's Append of 1 KiB (stream sets, 5 ms
//	         linger, flush when idle: one WAL append of about 1 KiB)
//	wal3     three virtual streams' Appends of 1 KiB at once, all waited
//	         for (the partitions of one Produce request: one WAL append)
//
// and reports each layer's p50 and mean in µs. Run:
//
//	go test ./stream/wal -run '^$' -bench AppendLatencyLayers -benchtime 3000x
func BenchmarkAppendLatencyLayers(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	config := func(sub string) []byte {
		return []byte("root: " + filepath.Join(root, sub) + "\ncreate_root: true\nlinger: 0s\n")
	}
	c, err := nfs.ParseConfig(config("put"))
	if err != nil {
		b.Fatal(err)
	}
	st, err := nfs.OpenStorage(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	engine, err := nfs.Open(ctx, config("engine"))
	if err != nil {
		b.Fatal(err)
	}
	defer engine.Close()
	es, err := engine.Open(ctx, "e", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		b.Fatal(err)
	}
	defer es.Close()
	base, err := nfs.Open(ctx, config("wal"))
	if err != nil {
		b.Fatal(err)
	}
	ws, err := NewStore(base, Options{Linger: 5 * time.Millisecond, FlushWhenIdle: true})
	if err != nil {
		b.Fatal(err)
	}
	vstore := stream.NewStore(ws)
	defer vstore.Close()
	var vs []*stream.Stream
	for i := range 3 {
		v, err := vstore.Open(ctx, "v"+strconv.Itoa(i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			b.Fatal(err)
		}
		vs = append(vs, v)
	}
	big, small := make([]byte, 3<<10), make([]byte, 1<<10)
	seq := 0
	layers := []struct {
		name string
		one  func() error
	}{
		{"put", func() error {
			seq++
			return st.PutIfAbsent(ctx, "s/c/"+strconv.Itoa(seq), big)
		}},
		{"engine", func() error {
			_, err := es.Append(ctx, stream.Batch{Count: 1, Payload: big}).Wait(ctx)
			return err
		}},
		{"wal1", func() error {
			_, err := vs[0].Append(ctx, stream.Batch{Count: 1, Payload: small}).Wait(ctx)
			return err
		}},
		{"wal3", func() error {
			var fs []*stream.AppendFuture
			for _, v := range vs {
				fs = append(fs, v.Append(ctx, stream.Batch{Count: 1, Payload: small}))
			}
			for _, f := range fs {
				if _, err := f.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	lat := make([][]time.Duration, len(layers))
	const slice = 100
	b.ResetTimer()
	for done := 0; done < b.N; done += slice {
		for i, l := range layers {
			for range min(slice, b.N-done) {
				t0 := time.Now()
				if err := l.one(); err != nil {
					b.Fatalf("%s: %v", l.name, err)
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}
	}
	b.StopTimer()
	for i, l := range layers {
		reportLatencies(b, l.name+"-", lat[i])
	}
}
