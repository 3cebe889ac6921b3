package wal

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// slowDataBase acknowledges every append to a data stream (V.data) late
// and records the most it saw in flight at once.
type slowDataBase struct {
	stream.DriverStore
	inflight, most atomic.Int64
}

func (b *slowDataBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := b.DriverStore.Open(ctx, name, o)
	if err != nil || !strings.HasSuffix(name, dataSuffix) {
		return st, err
	}
	return &slowDataStream{DriverStream: st, b: b}, nil
}

func (b *slowDataBase) Close() error { return nil }

type slowDataStream struct {
	stream.DriverStream
	b *slowDataBase
}

func (s *slowDataStream) Append(ctx context.Context, batch stream.Batch) *stream.AppendFuture {
	n := s.b.inflight.Add(1)
	for m := s.b.most.Load(); n > m && !s.b.most.CompareAndSwap(m, n); m = s.b.most.Load() {
	}
	inner := s.DriverStream.Append(ctx, batch) // in call order, as the contract wants
	f, done := stream.NewAppendFuture()
	go func() {
		r, err := inner.Wait(ctx)
		time.Sleep(5 * time.Millisecond) // a slow put: acknowledged late
		s.b.inflight.Add(-1)
		done(r, err)
	}()
	return f
}

// TestCompactParallelismBoundsCopies checks that a compaction pass has at
// most CompactParallelism data-stream appends in flight, over all the
// streams it copies, that it copies every tail whole, that a pass finding
// compaction behind takes at least BehindCompactParallelism, and (the
// check's own check) that a larger setting does put more in flight.
func TestCompactParallelismBoundsCopies(t *testing.T) {
	const streams, perStream = 6, 5 // each tail: 5 runs of about 1 MiB
	for _, tc := range []struct {
		par      int
		behind   bool // a background pass that finds compaction behind
		atMost   int64
		atLeast  int64
		describe string
	}{
		{par: 2, atMost: 2, atLeast: 1, describe: "bounded"},
		{par: 16, atMost: 16, atLeast: 3, describe: "unbounded enough to show the bound"},
		{par: 1, behind: true, atMost: BehindCompactParallelism, atLeast: 3, describe: "behind: at least BehindCompactParallelism"},
	} {
		t.Run(fmt.Sprint(tc.par, "-behind-", tc.behind), func(t *testing.T) {
			ctx := context.Background()
			mem := memory.New(memory.Config{})
			defer mem.Close()
			base := &slowDataBase{DriverStore: mem.Driver()}
			s, err := NewStore(stream.NewStore(base), Options{SweepInterval: -1, CompactParallelism: tc.par})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			payload := func(i, j int) []byte { return bytes.Repeat([]byte{byte(i*perStream + j)}, maxRunBytes-4096) }
			for i := range streams {
				st, err := s.Open(ctx, fmt.Sprint("s", i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				for j := range perStream {
					if _, err := stream.Append(ctx, st, stream.Batch{Count: 1, Payload: payload(i, j)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			base.most.Store(0)
			// The tails (30 MiB) are under CompactBytes: no background pass
			// runs; this one is what a pass due and behind would be.
			if tc.behind {
				err = s.pass(ctx, passPlan{all: true, behind: true})
			} else {
				err = s.Compact(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("CompactParallelism %d: at most %d data appends in flight", tc.par, base.most.Load())
			if m := base.most.Load(); m > tc.atMost || m < tc.atLeast {
				t.Fatalf("CompactParallelism %d (%s): at most %d data appends in flight; want %d to %d", tc.par, tc.describe, m, tc.atLeast, tc.atMost)
			}
			for i := range streams {
				ro, err := s.Open(ctx, fmt.Sprint("s", i), stream.OpenOptions{Mode: stream.ModeReadOnly})
				if err != nil {
					t.Fatal(err)
				}
				bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
				ro.Close()
				if err != nil || len(bs) != perStream {
					t.Fatalf("s%d after compaction: %d batches, %v", i, len(bs), err)
				}
				for j, b := range bs {
					if !bytes.Equal(b.Payload, payload(i, j)) {
						t.Fatalf("s%d batch %d: wrong bytes after compaction", i, j)
					}
				}
			}
		})
	}
}
