package wal

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
)

// timedBase adds up the time spent in the base store's Opens and in its
// streams' Appends (to the ack) and Fetches, by kind of base stream.
type timedBase struct {
	stream.DriverStore
	mu sync.Mutex
	d  map[string]time.Duration
	n  map[string]int
}

func kindOf(name string) string {
	switch {
	case strings.HasPrefix(name, DefaultPrefix+"/"):
		return "wal"
	case strings.HasSuffix(name, ".m"):
		return "meta"
	case strings.HasSuffix(name, ".d"):
		return "data"
	}
	return "plain"
}

func (t *timedBase) add(op string, began time.Time) {
	t.mu.Lock()
	t.d[op] += time.Since(began)
	t.n[op]++
	t.mu.Unlock()
}

func (t *timedBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	began := time.Now()
	st, err := t.DriverStore.Open(ctx, name, o)
	t.add("open "+kindOf(name), began)
	if err != nil {
		return nil, err
	}
	return &timedStream{DriverStream: st, t: t, kind: kindOf(name)}, nil
}

func (t *timedBase) Close() error { return nil }

type timedStream struct {
	stream.DriverStream
	t    *timedBase
	kind string
}

func (s *timedStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	began := time.Now()
	f := s.DriverStream.Append(ctx, b)
	out, done := stream.NewAppendFuture()
	go func() {
		r, err := f.Wait(context.Background())
		s.t.add("append "+s.kind, began)
		done(r, err)
	}()
	return out
}

func (s *timedStream) Fetch(ctx context.Context, start, end int64, max int) ([]stream.Batch, error) {
	began := time.Now()
	defer s.t.add("fetch "+s.kind, began)
	return s.DriverStream.Fetch(ctx, start, end, max)
}

// BenchmarkTakeover measures what a broker's takeover of a killed
// broker's partitions costs the stream layer: a writer session appends 20
// batches of 1 KiB to each of 85 virtual streams (a third of 256) on nfs
// with fsync and is abandoned (the "kill"); then a new session opens all
// of them at a higher epoch, 32 at a time (the broker's partitionOpens).
// It reports the time per takeover of all 85 and, in the log, the base
// store's time by operation; sets=false opens plain chunked streams the
// same way.
//
//	go test ./stream/wal -run '^$' -bench BenchmarkTakeover -benchtime 5x
func BenchmarkTakeover(b *testing.B) {
	for _, sets := range []bool{true, false} {
		b.Run(fmt.Sprintf("sets=%v", sets), func(b *testing.B) { benchTakeover(b, sets) })
	}
}

func benchTakeover(b *testing.B, sets bool) {
	const streams, parallel = 85, 32
	batches := takeoverBatches
	ctx := context.Background()
	var total time.Duration
	tb := &timedBase{d: map[string]time.Duration{}, n: map[string]int{}}
	for i := range b.N {
		b.StopTimer()
		config := []byte(fmt.Sprintf(`{"root": %q}`, b.TempDir()))
		bs, err := nfs.Open(ctx, config)
		if err != nil {
			b.Fatal(err)
		}
		names := make([]string, streams)
		for j := range names {
			names[j] = fmt.Sprintf("t-%d", j)
		}
		var writer *stream.Store
		var ws *Store
		if sets {
			ws, err = NewStore(stream.NewStore(keepBase{bs.Driver()}), Options{SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			writer = stream.NewStore(ws)
		} else {
			writer = stream.NewStore(keepBase{bs.Driver()})
		}
		payload := make([]byte, 1024)
		parallelDo(b, names, parallel, func(name string) error {
			s, err := writer.Open(ctx, name, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				return err
			}
			for range batches {
				if _, err := s.Append(ctx, stream.Batch{Count: 1, Payload: payload}).Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		})
		if ws != nil {
			ws.stop() // the kill: nothing more is written
		}
		// The new owner is another process: a store of its own, nothing
		// cached.
		rbs, err := nfs.Open(ctx, config)
		if err != nil {
			b.Fatal(err)
		}
		tb.DriverStore = rbs.Driver()
		b.StartTimer()
		began := time.Now()
		var reader *stream.Store
		if sets {
			rs, err := NewStore(stream.NewStore(tb), Options{SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			reader = stream.NewStore(rs)
		} else {
			reader = stream.NewStore(tb)
		}
		parallelDo(b, names, parallel, func(name string) error {
			s, err := reader.Open(ctx, name, stream.OpenOptions{Epoch: uint64(2 + i)})
			if err != nil {
				return err
			}
			if s.NextOffset() != int64(batches) {
				return fmt.Errorf("%s: NextOffset %d after takeover, want %d", name, s.NextOffset(), batches)
			}
			return nil
		})
		total += time.Since(began)
		b.StopTimer()
		_ = reader.Close()
		_ = writer.Close()
		_ = bs.Close()
		_ = rbs.Close()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/takeover")
	for op, d := range tb.d {
		b.Logf("%-12s %5d calls, %8.1f ms in all, %6.2f ms each", op, tb.n[op], float64(d.Microseconds())/1000/float64(b.N), float64(d.Microseconds())/1000/float64(tb.n[op]))
	}
}

func parallelDo(b *testing.B, names []string, parallel int, f func(string) error) {
	sem := make(chan struct{}, parallel)
	errs := make(chan error, len(names))
	for _, n := range names {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- f(n)
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// takeoverBatches is the batches per stream BenchmarkTakeover leaves in
// the WAL (-takeover.batches).
var takeoverBatches = *flag.Int("takeover.batches", 20, "BenchmarkTakeover: batches of 1 KiB per stream in the WAL at the kill")
