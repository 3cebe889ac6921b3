package wal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// keepBase keeps a shared base store open when one virtual Store closes.
type keepBase struct{ stream.DriverStore }

func (keepBase) Close() error { return nil }

func newTestStore(t *testing.T, base *stream.Store) *Store {
	t.Helper()
	s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testDataName is the data stream of name's incarnation, from its record.
func testDataName(t *testing.T, s *Store, name string) string {
	t.Helper()
	rec, ok, err := s.peekRecord(context.Background(), name)
	if err != nil || !ok {
		t.Fatalf("stream %q: its record: %v, %v", name, ok, err)
	}
	return rec.dataName()
}

func mustAppend(t *testing.T, st stream.DriverStream, payload string) stream.AppendResult {
	t.Helper()
	r, err := stream.Append(context.Background(), st, stream.Batch{Count: 1, Payload: []byte(payload)})
	if err != nil {
		t.Fatalf("append to %s: %v", st.Name(), err)
	}
	return r
}

// crashedWriter leaves streams with tails in the WAL of a writer session
// that is then abandoned (its Store dropped without Close), and returns
// the WAL's name.
func crashedWriter(t *testing.T, base *stream.Store, names ...string) string {
	t.Helper()
	return crashedWriterOpts(t, base, Options{SweepInterval: -1}, names...)
}

// crashedWriterOpts is crashedWriter with the writer's options.
func crashedWriterOpts(t *testing.T, base *stream.Store, opts Options, names ...string) string {
	t.Helper()
	s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range names {
		st, err := s.Open(ctx, n, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			mustAppend(t, st, fmt.Sprintf("%s-%d", n, i))
		}
	}
	s.mu.Lock()
	w := s.w.name
	s.mu.Unlock()
	s.stop() // the "crash": background work stops, nothing is written
	return w
}

// appendRaw appends payload to the base stream name after fencing it.
func appendRaw(t *testing.T, base *stream.Store, name string, epoch uint64, payload []byte) {
	t.Helper()
	ctx := context.Background()
	st, err := base.Open(ctx, name, stream.OpenOptions{Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := stream.Append(ctx, st, stream.Batch{Count: 1, Payload: payload}); err != nil {
		t.Fatal(err)
	}
}

func TestBadWALBatch(t *testing.T) {
	validOther, _, _ := encodeWALBatch(id{9}, []*entry{{claim: id{1}, count: 1, payload: []byte("x")}})
	own := func(wal string) id {
		sid, _ := (&Store{opts: Options{Prefix: DefaultPrefix}}).parseWALName(wal)
		return sid
	}
	for _, tc := range []struct {
		name string
		bad  func(wal string) []byte
	}{
		{"garbage", func(string) []byte { return []byte("not a WAL batch at all") }},
		{"truncated", func(w string) []byte {
			b, _, _ := encodeWALBatch(own(w), []*entry{{claim: id{1}, count: 1, payload: []byte("payload")}})
			return b[:len(b)-5]
		}},
		{"another session's", func(string) []byte { return validOther }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := memory.New(memory.Config{})
			w := crashedWriter(t, base, "a", "b")
			appendRaw(t, base, w, fenceEpoch, tc.bad(w))
			s := newTestStore(t, base)
			_, err := s.Open(context.Background(), "a", stream.OpenOptions{Epoch: 2})
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("open of a stream whose tail reaches a %s WAL batch: %v, want ErrCorrupt", tc.name, err)
			}
			ro, err := s.Open(context.Background(), "b", stream.OpenOptions{Mode: stream.ModeReadOnly})
			if err == nil {
				_, err = ro.Fetch(context.Background(), 0, stream.NoEnd, 0)
				ro.Close()
			}
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("read-only fetch of a stream whose tail reaches a %s WAL batch: %v, want ErrCorrupt", tc.name, err)
			}
		})
	}
}

func TestBadMetaRecord(t *testing.T) {
	other := record{kind: kindPark, inc: id{3}, name: "b"}
	for _, tc := range []struct {
		name string
		rec  []byte
	}{
		{"garbage", []byte("garbage")},
		{"truncated", (&record{kind: kindPark, inc: id{3}, name: "a"}).encode()[:20]},
		{"another stream's", other.encode()},
		{"unknown flags", append((&record{kind: kindPark, inc: id{3}, name: "a"}).encode(), recordTagged<<1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := memory.New(memory.Config{})
			s := newTestStore(t, base)
			ctx := context.Background()
			st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, st, "one")
			st.Close()
			appendRaw(t, base, metaName("a"), 2, tc.rec)
			for _, mode := range []stream.Mode{stream.ModeReadWrite, stream.ModeReadOnly} {
				_, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 3, Mode: mode})
				if !errors.Is(err, stream.ErrCorrupt) {
					t.Fatalf("%v open after a %s meta record: %v, want ErrCorrupt", mode, tc.name, err)
				}
			}
		})
	}
}

func TestForeignDataBatch(t *testing.T) {
	base := memory.New(memory.Config{})
	s := newTestStore(t, base)
	ctx := context.Background()
	st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, st, "one")
	st.Close() // compacts: "one" is in V.data
	// A batch of another incarnation (as a copied-over object would be).
	appendRaw(t, base, testDataName(t, s, "a"), 2, encodeRun(id{7}, []*entry{{base: 1, count: 1, payload: []byte("foreign"), crc: stream.Checksum([]byte("foreign"))}}).Payload)
	st, err = s.Open(ctx, "a", stream.OpenOptions{Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := st.Fetch(ctx, 1, stream.NoEnd, 0)
	if !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("fetch of a foreign data batch: %d batches, %v; want ErrCorrupt", len(bs), err)
	}
	if bs, err := st.Fetch(ctx, 0, 1, 0); err != nil || len(bs) != 1 || string(bs[0].Payload) != "one" {
		t.Fatalf("fetch of the stream's own batch: %v, %v", bs, err)
	}
	st.Close()
	// A batch of the stream's own incarnation, stored at another offset
	// than its own (offset 2 holding the batch of offset 5).
	rec, _, err := s.peekRecord(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	appendRaw(t, base, rec.dataName(), 4, encodeRun(rec.inc, []*entry{{base: 5, count: 1, payload: []byte("moved"), crc: stream.Checksum([]byte("moved"))}}).Payload)
	st, err = s.Open(ctx, "a", stream.OpenOptions{Epoch: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if bs, err := st.Fetch(ctx, 2, stream.NoEnd, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("fetch of a data batch stored at another offset than its own: %d batches, %v; want ErrCorrupt", len(bs), err)
	}
}

// countingBase counts the fencing opens of WALs and their fetches.
type countingBase struct {
	stream.DriverStore
	walOpens, walFetches atomic.Int64
}

func (c *countingBase) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := c.DriverStore.Open(ctx, name, o)
	if err != nil || !strings.HasPrefix(name, DefaultPrefix+"/") || o.Epoch != fenceEpoch {
		return st, err // not a fencing open of a WAL
	}
	c.walOpens.Add(1)
	return countingStream{st, c}, nil
}

func (c *countingBase) Close() error { return nil }

type countingStream struct {
	stream.DriverStream
	c *countingBase
}

func (s countingStream) Fetch(ctx context.Context, start, end int64, max int) ([]stream.Batch, error) {
	s.c.walFetches.Add(1)
	return s.DriverStream.Fetch(ctx, start, end, max)
}

// TestRecoveryReadsWALOnce: opening many streams whose tails sit in one
// frozen WAL fences and reads that WAL once, not once per stream.
func TestRecoveryReadsWALOnce(t *testing.T) {
	base := memory.New(memory.Config{})
	var names []string
	for i := range 64 {
		names = append(names, fmt.Sprintf("p/%d", i))
	}
	crashedWriter(t, base, names...)
	cb := &countingBase{DriverStore: base.Driver()}
	s, err := NewStore(stream.NewStore(cb), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := takeOverAll(names, func(int) *Store { return s }); err != nil {
		t.Fatal(err)
	}
	if o, f := cb.walOpens.Load(), cb.walFetches.Load(); o != 1 || f > 2 {
		t.Fatalf("opening %d streams with tails in one WAL opened it %d times and fetched %d times; want 1 open, at most 2 fetches", len(names), o, f)
	}
	t.Logf("%d streams reopened: the WAL opened %d time, fetched %d times", len(names), cb.walOpens.Load(), cb.walFetches.Load())
}

// TestNoOpTrimOfFencedSession: a trim that moves nothing still fails
// ErrFenced on a session a newer one fenced.
func TestNoOpTrimOfFencedSession(t *testing.T) {
	ctx := context.Background()
	base, err := chunked.NewStore(chunked.NewMemStorage(), chunked.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	s1, s2 := newTestStore(t, base), newTestStore(t, base)
	old, err := s1.Open(ctx, "v", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, old, "a")
	if err := old.Trim(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Open(ctx, "v", stream.OpenOptions{Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if err := old.Trim(ctx, 1); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("no-op trim by the fenced session: %v, want ErrFenced", err)
	}
}

// TestTakeoverOfAWALAnotherFenced: two brokers that take over the streams
// of one dead broker fence its WAL at once, and one fencing session
// supersedes the other. The superseded one reads the WAL read-only (it is
// fenced, and frozen) instead of failing the opens ErrFenced, which the
// broker retried for seconds. Deterministically: another fencer opened
// the WAL above fenceEpoch first; then two stores race.
func TestTakeoverOfAWALAnotherFenced(t *testing.T) {
	ctx := context.Background()
	t.Run("fenced before", func(t *testing.T) {
		base := memory.New(memory.Config{})
		names := []string{"a", "b", "c"}
		wal := crashedWriter(t, base, names...)
		other, err := base.Open(ctx, wal, stream.OpenOptions{Epoch: fenceEpoch + 1})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, n := range names {
			st, err := s.Open(ctx, n, stream.OpenOptions{Epoch: 2})
			if err != nil {
				t.Fatalf("takeover of %s, its WAL fenced by another: %v", n, err)
			}
			bs, err := st.Fetch(ctx, 0, stream.NoEnd, 1<<20)
			if err != nil || len(bs) != 3 || string(bs[2].Payload) != n+"-2" {
				t.Fatalf("%s after the takeover: %d batches, %v", n, len(bs), err)
			}
		}
	})
	t.Run("racing", func(t *testing.T) {
		for round := range 20 {
			base := memory.New(memory.Config{})
			var names []string
			for i := range 16 {
				names = append(names, fmt.Sprintf("r%d-%d", round, i))
			}
			crashedWriter(t, base, names...)
			var stores []*Store
			for range 2 {
				s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), Options{SweepInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				stores = append(stores, s)
			}
			if err := takeOverAll(names, func(i int) *Store { return stores[i%2] }); err != nil {
				t.Fatalf("round %d: two stores taking over one dead WAL's streams: %v", round, err)
			}
		}
	})
}

// takeOverAll opens every one of crashedWriter's streams at epoch 2 at
// once, stream i on the store of(i), checks that each holds its 3
// batches, closes it, and returns the errors joined.
func takeOverAll(names []string, of func(i int) *Store) error {
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := of(i).Open(context.Background(), n, stream.OpenOptions{Epoch: 2})
			if err == nil {
				if st.NextOffset() != 3 {
					err = fmt.Errorf("%s: NextOffset %d, want 3", n, st.NextOffset())
				}
				st.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestNegativeOptionsRefused checks that NewStore names a negative option
// and makes no store of it.
func TestNegativeOptionsRefused(t *testing.T) {
	base := memory.New(memory.Config{})
	defer base.Close()
	for name, o := range map[string]Options{
		"MaxFlushBytes":      {MaxFlushBytes: -1},
		"MaxInflightFlushes": {MaxInflightFlushes: -1},
		"CompactBytes":       {CompactBytes: -1},
		"CompactInterval":    {CompactInterval: -1},
		"CompactParallelism": {CompactParallelism: -1},
	} {
		s, err := NewStore(stream.NewStore(keepBase{base.Driver()}), o)
		if err == nil {
			s.Close()
			t.Errorf("%s -1: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s -1: %v, which does not name it", name, err)
		}
	}
}
