package chunked

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

func newTestStore(t testing.TB, st Storage, opts Options) *stream.Store {
	t.Helper()
	s, err := NewStore(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustOpen(t testing.TB, s *stream.Store, name string, epoch uint64) *stream.Stream {
	t.Helper()
	st, err := s.Open(context.Background(), name, stream.OpenOptions{Epoch: epoch, CreateIfMissing: true})
	if err != nil {
		t.Fatalf("open %s epoch %d: %v", name, epoch, err)
	}
	return st
}

func payload(i int) []byte { return []byte(fmt.Sprintf("payload-%04d", i)) }

func fetchAll(t testing.TB, st *stream.Stream, from int64) []stream.Batch {
	t.Helper()
	var out []stream.Batch
	for {
		bs, err := st.Fetch(context.Background(), from, stream.NoEnd, 0)
		if err != nil {
			t.Fatalf("fetch %d: %v", from, err)
		}
		if len(bs) == 0 {
			return out
		}
		out = append(out, bs...)
		from = bs[len(bs)-1].EndOffset()
	}
}

func TestAppendFetchReopen(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s := newTestStore(t, mem, Options{MaxInflightChunks: 3})
	w := mustOpen(t, s, "a/b", 1)
	var fs []*stream.AppendFuture
	for i := 0; i < 100; i++ {
		fs = append(fs, w.Append(ctx, stream.Batch{Count: 2, Timestamp: int64(i), Payload: payload(i), Properties: map[string]string{"k": "v"}}))
	}
	for i, f := range fs {
		r, err := f.Result()
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if r.BaseOffset != int64(2*i) {
			t.Fatalf("append %d at %d, want %d", i, r.BaseOffset, 2*i)
		}
	}
	if got := w.NextOffset(); got != 200 {
		t.Fatalf("next %d", got)
	}
	check := func(st *stream.Stream) {
		t.Helper()
		bs := fetchAll(t, st, 0)
		if len(bs) != 100 {
			t.Fatalf("fetched %d batches", len(bs))
		}
		for i, b := range bs {
			if b.BaseOffset != int64(2*i) || !bytes.Equal(b.Payload, payload(i)) || b.Properties["k"] != "v" || b.Timestamp != int64(i) {
				t.Fatalf("batch %d: %+v", i, b)
			}
		}
	}
	check(w)
	// A second store (another process) opens read-only and with a higher epoch.
	s2 := newTestStore(t, mem, Options{})
	r, err := s2.Open(ctx, "a/b", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	check(r)
	w2 := mustOpen(t, s2, "a/b", 2)
	if w2.NextOffset() != 200 {
		t.Fatalf("reopen next %d", w2.NextOffset())
	}
	check(w2)
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("stale")}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("stale append: %v", err)
	}
	if _, err := stream.Append(ctx, w2, stream.Batch{Count: 1, Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	// read-after-ack across stores
	bs, err := r.Fetch(ctx, 200, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || string(bs[0].Payload) != "new" {
		t.Fatalf("reader after ack: %v %v", bs, err)
	}
	if _, err := s.Open(ctx, "a/b", stream.OpenOptions{Epoch: 1}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("lower epoch open: %v", err)
	}
	// same-epoch reopen fences the older same-epoch session
	w3 := mustOpen(t, s, "a/b", 2)
	if _, err := stream.Append(ctx, w2, stream.Batch{Count: 1, Payload: []byte("x")}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("same-epoch stale append: %v", err)
	}
	if w3.NextOffset() != 201 {
		t.Fatalf("w3 next %d", w3.NextOffset())
	}
}

func TestTrimGCDelete(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s := newTestStore(t, mem, Options{})
	w := mustOpen(t, s, "t", 1)
	for i := 0; i < 20; i++ {
		if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Trim(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if w.StartOffset() != 10 {
		t.Fatalf("start %d", w.StartOffset())
	}
	if _, err := w.Fetch(ctx, 9, stream.NoEnd, 0); !errors.Is(err, stream.ErrOffsetOutOfRange) {
		t.Fatalf("fetch below start: %v", err)
	}
	if err := w.Trim(ctx, 21); !errors.Is(err, stream.ErrOffsetOutOfRange) {
		t.Fatalf("trim past end: %v", err)
	}
	w.Close()
	s.Driver().(*Store).gcs.Wait()
	chunks := 0
	for _, k := range mem.Keys() {
		if bytes.Contains([]byte(k), []byte("/c/")) {
			chunks++
		}
	}
	if chunks != 10 {
		t.Fatalf("%d chunk objects after GC, want 10: %v", chunks, mem.Keys())
	}
	w = mustOpen(t, s, "t", 2)
	if w.StartOffset() != 10 || w.NextOffset() != 20 {
		t.Fatalf("reopen start %d next %d", w.StartOffset(), w.NextOffset())
	}
	if bs := fetchAll(t, w, 10); len(bs) != 10 || string(bs[0].Payload) != string(payload(10)) {
		t.Fatalf("after trim: %v", bs)
	}
	names, err := s.List(ctx, "")
	if err != nil || len(names) != 1 || names[0] != "t" {
		t.Fatalf("list %v %v", names, err)
	}
	if err := s.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("x")}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("append after delete: %v", err)
	}
	if names, _ := s.List(ctx, ""); len(names) != 0 {
		t.Fatalf("list after delete %v", names)
	}
	if _, err := s.Open(ctx, "t", stream.OpenOptions{Epoch: 3}); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("open after delete: %v", err)
	}
	w = mustOpen(t, s, "t", 0)
	if w.NextOffset() != 0 {
		t.Fatalf("recreated next %d", w.NextOffset())
	}
	if err := s.Create(ctx, "t"); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatalf("create existing: %v", err)
	}
}

func TestLingerGroupsAppends(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s := newTestStore(t, mem, Options{Linger: 20 * time.Millisecond})
	w := mustOpen(t, s, "g", 1)
	before := mem.RequestStats().Puts
	var fs []*stream.AppendFuture
	for i := 0; i < 50; i++ {
		fs = append(fs, w.Append(ctx, stream.Batch{Count: 1, Payload: payload(i)}))
	}
	for _, f := range fs {
		if _, err := f.Result(); err != nil {
			t.Fatal(err)
		}
	}
	if puts := mem.RequestStats().Puts - before; puts > 5 {
		t.Fatalf("50 appends within the linger took %d puts", puts)
	}
}

func TestCorruptChunk(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s := newTestStore(t, mem, Options{CacheBytes: -1})
	w := mustOpen(t, s, "c", 1)
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("hello world")}); err != nil {
		t.Fatal(err)
	}
	var key string
	for _, k := range mem.Keys() {
		if bytes.Contains([]byte(k), []byte("/c/")) {
			key = k // the last chunk: the data chunk after the fence
		}
	}
	if !mem.Corrupt(key, len("hello world")+chunkHeaderLen) {
		t.Fatal("corrupt failed")
	}
	if _, err := w.Fetch(ctx, 0, stream.NoEnd, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("fetch of a flipped byte: %v", err)
	}
}

// hangingStorage blocks every call while stopped (a backend taken away
// mid-append), ignoring its context as a stuck mount would.
type hangingStorage struct {
	*MemStorage
	mu      sync.Mutex
	stopped chan struct{} // nil while running
}

func (h *hangingStorage) gate() {
	h.mu.Lock()
	c := h.stopped
	h.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (h *hangingStorage) stop() { h.mu.Lock(); h.stopped = make(chan struct{}); h.mu.Unlock() }
func (h *hangingStorage) start() {
	h.mu.Lock()
	close(h.stopped)
	h.stopped = nil
	h.mu.Unlock()
}

func (h *hangingStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	h.gate()
	return h.MemStorage.PutIfAbsent(ctx, key, data)
}

func (h *hangingStorage) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	h.gate()
	return h.MemStorage.Get(ctx, key, off, n)
}

func TestUnavailableWithinOpTimeout(t *testing.T) {
	ctx := context.Background()
	hs := &hangingStorage{MemStorage: NewMemStorage()}
	s := newTestStore(t, hs, Options{OpTimeout: 50 * time.Millisecond})
	w := mustOpen(t, s, "f", 1)
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	hs.stop()
	var fs []*stream.AppendFuture
	for i := 0; i < 5; i++ {
		fs = append(fs, w.Append(ctx, stream.Batch{Count: 1, Payload: payload(i)}))
	}
	for i, f := range fs {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := f.Wait(wctx)
		cancel()
		if !errors.Is(err, stream.ErrUnavailable) {
			t.Fatalf("append %d with the backend stopped: %v, want ErrUnavailable", i, err)
		}
	}
	if _, err := w.Fetch(ctx, 0, stream.NoEnd, 0); err != nil {
		t.Fatalf("fetch of cached, acked data while stopped: %v", err)
	}
	hs.start()
	// After the backend returns, the session recovers (re-walk) and goes on.
	r, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("after")})
	if err != nil {
		t.Fatal(err)
	}
	bs := fetchAll(t, w, 0)
	if len(bs) == 0 || string(bs[0].Payload) != "before" || bs[len(bs)-1].BaseOffset != r.BaseOffset || string(bs[len(bs)-1].Payload) != "after" {
		t.Fatalf("log after the fault: %v", bs)
	}
	for i, b := range bs {
		if b.BaseOffset != int64(i) {
			t.Fatalf("gap or duplicate at batch %d: %+v", i, b)
		}
	}
}

func TestReadOnlyAndStaleWriterAfterDelete(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s1 := newTestStore(t, mem, Options{})
	s2 := newTestStore(t, mem, Options{})
	w := mustOpen(t, s1, "d", 1)
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	r, err := s2.Open(ctx, "d", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Delete(ctx, "d"); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := r.Fetch(ctx, 0, stream.NoEnd, 0); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("reader of a deleted stream: %v", err)
	}
	if err := w.Trim(ctx, 1); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("trim by a holder of a deleted stream: %v", err)
	}
	// Recreated: the old holder's appends never reach the new incarnation.
	w2 := mustOpen(t, s2, "d", 1)
	if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("stale")}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("stale append after delete: %v", err)
	}
	if bs := fetchAll(t, w2, 0); len(bs) != 0 {
		t.Fatalf("recreated stream shows old data: %v", bs)
	}
}

func TestListNestedNames(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, NewMemStorage(), Options{})
	names := []string{"a", "a/b", "a.stream", "ab", "a.stream/g/00000000000000000001", "a/b/c", "b"}
	for _, n := range names {
		w := mustOpen(t, s, n, 1)
		if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte(n)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		r, err := s.Open(ctx, n, stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		if bs := fetchAll(t, r, 0); len(bs) != 1 || string(bs[0].Payload) != n {
			t.Fatalf("stream %q holds %v", n, bs)
		}
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a", "a.stream", "a.stream/g/00000000000000000001", "a/b", "a/b/c", "ab", "b"}},
		{"a", []string{"a", "a.stream", "a.stream/g/00000000000000000001", "a/b", "a/b/c", "ab"}},
		{"a/", []string{"a/b", "a/b/c"}},
		{"a.stream/", []string{"a.stream/g/00000000000000000001"}},
		{"c", []string{}},
		{"../", []string{}},
	} {
		got, err := s.List(ctx, c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || got == nil {
			t.Errorf("List(%q) = %v, want %v", c.prefix, got, c.want)
		}
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.List(ctx, "a"); fmt.Sprint(got) != fmt.Sprint([]string{"a.stream", "a.stream/g/00000000000000000001", "a/b", "a/b/c", "ab"}) {
		t.Errorf("after Delete(a): %v", got)
	}
	if r, err := s.Open(ctx, "a/b", stream.OpenOptions{Mode: stream.ModeReadOnly}); err != nil || len(fetchAll(t, r, 0)) != 1 {
		t.Errorf("a/b after Delete(a): %v", err)
	}
}

func TestRequestStatsSub(t *testing.T) {
	a := RequestStats{Puts: 5, Gets: 7, Heads: 1, Lists: 2, Deletes: 3, BytesWritten: 100, BytesRead: 50, Retries: 4, Errors: 1}
	b := RequestStats{Puts: 2, Gets: 7, Heads: 0, Lists: 1, Deletes: 1, BytesWritten: 40, BytesRead: 10, Retries: 1, Errors: 0}
	want := RequestStats{Puts: 3, Gets: 0, Heads: 1, Lists: 1, Deletes: 2, BytesWritten: 60, BytesRead: 40, Retries: 3, Errors: 1}
	if got := a.Sub(b); got != want {
		t.Fatalf("Sub = %+v, want %+v", got, want)
	}
}
