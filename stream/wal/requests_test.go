package wal

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// putCounter counts a chunked.Storage's writes (PutIfAbsent and Put) by the
// kind of base stream they go to: "wal", "meta" (V.meta), "data" (V.data).
type putCounter struct {
	chunked.Storage
	mu sync.Mutex
	n  map[string]int
}

func (c *putCounter) count(key string) {
	kind := "other"
	switch name, _, _ := strings.Cut(key, "/"); {
	case name == DefaultPrefix:
		kind = "wal"
	case strings.HasSuffix(name, ".m.stream"):
		kind = "meta"
	case strings.HasSuffix(name, ".d.stream"):
		kind = "data"
	}
	c.mu.Lock()
	c.n[kind]++
	c.mu.Unlock()
}

func (c *putCounter) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	c.count(key)
	return c.Storage.PutIfAbsent(ctx, key, data)
}

func (c *putCounter) Put(ctx context.Context, key string, data []byte) error {
	c.count(key)
	return c.Storage.Put(ctx, key, data)
}

// take returns the counts since the last take.
func (c *putCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = make(map[string]int)
	return n
}

// TestCompactionPassPuts holds a compaction pass to its cost on a billed
// backend: two puts per stream it copies (the tail's V.data append and the
// stream's record; the first pass also creates each V.data) and at most a few for the WAL (its trim), whatever the
// number of appends; and appends after a pass claim nothing again (the
// pass's record is the stream's claim), so they cost only WAL puts.
func TestCompactionPassPuts(t *testing.T) {
	const streams, perRound = 64, 640
	ctx := context.Background()
	pc := &putCounter{Storage: chunked.NewMemStorage(), n: make(map[string]int)}
	base, err := chunked.NewStore(pc, chunked.Options{Driver: "counted"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(base, Options{Linger: 20 * time.Millisecond, CompactInterval: 1 << 40, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// What creating a base stream puts: a new incarnation creates its
	// V.data at its first pass.
	probe, err := base.Open(ctx, "probe.d", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	create := pc.take()["data"]
	probe.Close()
	var sts []stream.DriverStream
	pc.take()
	for i := range streams {
		st, err := s.Open(ctx, "p"+strconv.Itoa(i), stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	pc.take()
	payload := make([]byte, 1024)
	for round := range 3 {
		var fs []*stream.AppendFuture
		for i := range perRound {
			fs = append(fs, sts[i%streams].Append(ctx, stream.Batch{Count: 1, Payload: payload}))
		}
		for _, f := range fs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		appends := pc.take()
		wantMeta := 0
		if round == 0 {
			wantMeta = streams // the first append of each stream claims
		}
		if appends["meta"] != wantMeta || appends["data"] != 0 || appends["other"] != 0 || appends["wal"] == 0 || appends["wal"] > perRound/10 {
			t.Errorf("round %d: %d appends over %d streams put %v; want %d meta, no data, a few WAL puts", round, perRound, streams, appends, wantMeta)
		}
		if err := s.Compact(ctx); err != nil {
			t.Fatal(err)
		}
		pass := pc.take()
		wantData := streams
		if round == 0 {
			wantData += streams * create // each stream's V.data is created
		}
		if pass["data"] != wantData || pass["meta"] != streams || pass["other"] != 0 || pass["wal"] > 4 {
			t.Errorf("round %d: the pass put %v; want %d data, %d meta, at most 4 WAL", round, pass, wantData, streams)
		}
		t.Logf("round %d: appends %v, pass %v", round, appends, pass)
	}
}
