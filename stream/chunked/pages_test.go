package chunked

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratastream/strata/stream"
)

// metaBytes counts the bytes put to manifests and index pages.
type metaBytes struct {
	*MemStorage
	manifests, pages atomic.Int64
	largest          atomic.Int64 // the largest manifest
}

func (m *metaBytes) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	switch {
	case strings.Contains(key, "/m/"):
		m.manifests.Add(int64(len(data)))
		if int64(len(data)) > m.largest.Load() {
			m.largest.Store(int64(len(data)))
		}
	case strings.Contains(key, "/x/"):
		m.pages.Add(int64(len(data)))
	}
	return m.MemStorage.PutIfAbsent(ctx, key, data)
}

// appendEach appends n one-record batches one at a time (one chunk each).
func appendEach(t *testing.T, w *stream.Stream, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := stream.Append(context.Background(), w, stream.Batch{Count: 1, Payload: payload(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// newestManifest reads the newest manifest of stream name.
func newestManifest(t *testing.T, st Storage, name string) (layout, *manifest) {
	t.Helper()
	ss, err := NewStore(keepOpen{st}, Options{Driver: "pages-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	s := ss.Driver().(*Store)
	l, _, err := s.live(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := s.latestManifest(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	return l, m
}

// checkBatches asserts that bs are the one-record batches from..to-1.
func checkBatches(t *testing.T, bs []stream.Batch, from, to int) {
	t.Helper()
	if len(bs) != to-from {
		t.Fatalf("read %d batches, want %d (offsets %d-%d)", len(bs), to-from, from, to)
	}
	for i, b := range bs {
		if b.BaseOffset != int64(from+i) || string(b.Payload) != string(payload(from+i)) {
			t.Fatalf("batch %d: offset %d payload %q, want %d %q", i, b.BaseOffset, b.Payload, from+i, payload(from+i))
		}
	}
}

// TestManifestsNameIndexPages: on a stream that is never trimmed, a
// manifest names the chunks before its last few by index pages written
// once, instead of listing every chunk again at every checkpoint, so the
// bytes of metadata a stream writes grow with its chunks, not with their
// square. The same workload with pages switched off writes the old amount.
func TestManifestsNameIndexPages(t *testing.T) {
	const chunks, perPage, checkpoint = 600, 32, 8
	run := func(pageEntries int) *metaBytes {
		mb := &metaBytes{MemStorage: NewMemStorage()}
		s := newTestStore(t, keepOpen{mb}, Options{Driver: "pages-test", CheckpointChunks: checkpoint, IndexPageEntries: pageEntries})
		w := mustOpen(t, s, "p", 1)
		appendEach(t, w, 0, chunks)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return mb
	}
	paged, flat := run(perPage), run(-1)
	_, m := newestManifest(t, paged, "p")
	if len(m.Index) >= perPage || len(m.Pages) != chunks/perPage {
		t.Fatalf("newest manifest: %d pages and %d entries of its own; want %d pages and fewer than %d entries",
			len(m.Pages), len(m.Index), chunks/perPage, perPage)
	}
	pagedTotal := paged.manifests.Load() + paged.pages.Load()
	t.Logf("metadata bytes for %d chunks: %d with pages of %d (largest manifest %d), %d without (largest %d)",
		chunks, pagedTotal, perPage, paged.largest.Load(), flat.manifests.Load(), flat.largest.Load())
	if flat.largest.Load() < chunks*indexEntryLen || paged.largest.Load() > int64(manifestFixedLen+4+len(m.Pages)*pageRefLen+perPage*indexEntryLen) {
		t.Fatalf("largest manifest %d bytes with pages, %d without", paged.largest.Load(), flat.largest.Load())
	}
	if 5*pagedTotal > flat.manifests.Load() {
		t.Fatalf("metadata bytes: %d with pages, %d without: want at least 5x fewer", pagedTotal, flat.manifests.Load())
	}
	if n := paged.RequestStats().Lists; n != 0 {
		t.Fatalf("%d LIST requests: pages and manifests are found without listing", n)
	}
	// A new session and a reader of another Store see every batch.
	s2 := newTestStore(t, paged, Options{Driver: "pages-test", IndexPageEntries: 5})
	w := mustOpen(t, s2, "p", 2)
	appendEach(t, w, chunks, 10)
	checkBatches(t, fetchAll(t, w, 0), 0, chunks+10)
	r, err := s2.Open(context.Background(), "p", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, fetchAll(t, r, 0), 0, chunks+10)
	_ = r.Close()
	_ = w.Close()
}

// TestTrimCollectsIndexPages: a trim drops the pages wholly below the new
// start from its manifest and then deletes them; the rest stay and still
// serve reads.
func TestTrimCollectsIndexPages(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s, err := NewStore(keepOpen{mem}, Options{Driver: "pages-test", CheckpointChunks: 4, IndexPageEntries: 8})
	if err != nil {
		t.Fatal(err)
	}
	w := mustOpen(t, s, "t", 1)
	appendEach(t, w, 0, 200)
	pageKeys := func() []string {
		var out []string
		for _, k := range mem.Keys() {
			if strings.Contains(k, "/x/") {
				out = append(out, k)
			}
		}
		return out
	}
	before := len(pageKeys())
	if err := w.Trim(ctx, 150); err != nil {
		t.Fatal(err)
	}
	waitGC(s)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l, m := newestManifest(t, mem, "t")
	left := pageKeys()
	if len(m.Pages) == 0 || m.Pages[0].Next <= 150 || m.Pages[0].Base > 150 {
		t.Fatalf("after trim to 150 the manifest names pages %+v", m.Pages)
	}
	if len(left) != len(m.Pages) || before <= len(left) {
		t.Fatalf("%d index pages before the trim, %d after, the manifest names %d", before, len(left), len(m.Pages))
	}
	for _, p := range m.Pages {
		if _, err := mem.Stat(ctx, l.page(p)); err != nil {
			t.Fatalf("page %s the manifest names: %v", l.page(p), err)
		}
	}
	s2 := newTestStore(t, mem, Options{Driver: "pages-test"})
	r, err := s2.Open(ctx, "t", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.StartOffset() != 150 {
		t.Fatalf("start offset %d, want 150", r.StartOffset())
	}
	checkBatches(t, fetchAll(t, r, 150), 150, 200)
}

// TestReaderPassesCollectedPage: a reader that meets a manifest whose
// index page a later trim has collected goes on to that trim's manifest,
// both when it refreshes and when it opens.
func TestReaderPassesCollectedPage(t *testing.T) {
	ctx := context.Background()
	g := &pageGetHook{MemStorage: NewMemStorage()}
	ws := newTestStore(t, keepOpen{g}, Options{Driver: "pages-test", CheckpointChunks: 4, IndexPageEntries: 8})
	w := mustOpen(t, ws, "r", 1)
	appendEach(t, w, 0, 4)

	// Refresh: the reader knows no pages; a checkpoint then writes some,
	// and a trim drops and collects them before the reader looks again.
	rs := newTestStore(t, keepOpen{g}, Options{Driver: "pages-test"})
	early, err := rs.Open(ctx, "r", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	appendEach(t, w, 4, 60)
	if err := w.Trim(ctx, 40); err != nil {
		t.Fatal(err)
	}
	waitGC(ws)
	checkBatches(t, fetchAll(t, early, 40), 40, 64)
	if g.gone.Load() == 0 {
		t.Fatal("the reader's refresh met no collected index page: the test tests nothing")
	}

	// Open: a trim drops the page the reader is about to read, between
	// its reading the manifest and the page.
	appendEach(t, w, 64, 40)
	var trimmed sync.Once
	g.before = func(key string) {
		trimmed.Do(func() {
			if err := w.Trim(ctx, 100); err != nil {
				t.Error(err)
			}
			waitGC(ws)
		})
	}
	gone := g.gone.Load()
	r, err := rs.Open(ctx, "r", stream.OpenOptions{Mode: stream.ModeReadOnly})
	g.before = nil
	if err != nil {
		t.Fatalf("open read-only while a trim collects a page: %v", err)
	}
	defer r.Close()
	if g.gone.Load() == gone {
		t.Fatal("the open met no collected index page: the test tests nothing")
	}
	if r.StartOffset() != 100 {
		t.Fatalf("start offset %d, want 100", r.StartOffset())
	}
	checkBatches(t, fetchAll(t, r, 100), 100, 104)
	_ = w.Close()
}

// waitGC waits for the background GCs s started.
func waitGC(s *stream.Store) { s.Driver().(*Store).gcs.Wait() }

// pageGetHook runs before, when set, ahead of every Get of an index page,
// and counts the Gets of index pages that are gone.
type pageGetHook struct {
	*MemStorage
	before func(key string)
	gone   atomic.Int64
}

func (g *pageGetHook) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if !strings.Contains(key, "/x/") {
		return g.MemStorage.Get(ctx, key, off, n)
	}
	if f := g.before; f != nil {
		f(key)
	}
	b, err := g.MemStorage.Get(ctx, key, off, n)
	if errors.Is(err, stream.ErrNotFound) {
		g.gone.Add(1)
	}
	return b, err
}

// TestMissingPageIsCorrupt: a page that is gone while no later manifest
// explains it is reported as corruption, never read around.
func TestMissingPageIsCorrupt(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	s := newTestStore(t, keepOpen{mem}, Options{Driver: "pages-test", CheckpointChunks: 4, IndexPageEntries: 8})
	w := mustOpen(t, s, "c", 1)
	appendEach(t, w, 0, 20)
	_ = w.Close()
	for _, k := range mem.Keys() {
		if strings.Contains(k, "/x/") {
			_ = mem.Delete(ctx, []string{k})
		}
	}
	s2 := newTestStore(t, mem, Options{Driver: "pages-test"})
	_, err := s2.Open(ctx, "c", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if !errors.Is(err, stream.ErrCorrupt) || !strings.Contains(err.Error(), "index page") {
		t.Fatalf("open read-only with its index page gone: %v, want ErrCorrupt naming the page", err)
	}
	_, err = s2.Open(ctx, "c", stream.OpenOptions{Epoch: 2})
	if !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("open with its index page gone: %v, want ErrCorrupt", err)
	}
}
