package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Run runs the whole suite against the Storage that h opens. In a racer
// child process (see the package doc) it serves put commands instead and
// returns without running any case.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if isRacer() {
		runRacer(t, h)
		return
	}
	if h.Open == nil || h.NewConfig == nil {
		t.Fatal("storagetest: Harness.Open and Harness.NewConfig are required")
	}
	h = h.withDefaults()
	pattern := runPattern(t.Name())
	cases := []struct {
		name string
		fn   func(t *testing.T, h Harness, st chunked.Storage)
	}{
		{"PutIfAbsent", testPutIfAbsent},
		{"Put", testPut},
		{"EmptyObject", testEmptyObject},
		{"RangeRead", testRangeRead},
		{"Stat", testStat},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"NestedKeys", testNestedKeys},
		{"List", testList},
		{"ConcurrentPutIfAbsent", testConcurrentPutIfAbsent},
		{"ConcurrentDistinctPuts", testConcurrentDistinctPuts},
		{"TwoHandles", testTwoHandles},
		{"RequestStats", testRequestStats},
		{"EngineIndexPages", testEngineIndexPages},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, h, open(t, h, h.NewConfig(t)))
		})
	}
	t.Run("ProcessRace", func(t *testing.T) { testProcessRace(t, h, pattern) })
}

// open opens a Storage on config and closes it when t ends, checking the
// Close error.
func open(t *testing.T, h Harness, config []byte) chunked.Storage {
	t.Helper()
	st, err := h.Open(t.Context(), config)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// payload returns n deterministic bytes that differ per seed.
func payload(seed string, n int) []byte {
	var s uint64
	for i := 0; i < len(seed); i++ {
		s = s*1099511628211 + uint64(seed[i])
	}
	r := rand.New(rand.NewPCG(s, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustGet(t *testing.T, st chunked.Storage, key string, off, length int64) []byte {
	t.Helper()
	b, err := st.Get(t.Context(), key, off, length)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, off, length, err)
	}
	return b
}

func mustPutIfAbsent(t *testing.T, st chunked.Storage, key string, data []byte) {
	t.Helper()
	if err := st.PutIfAbsent(t.Context(), key, data); err != nil {
		t.Fatalf("PutIfAbsent(%q, %d bytes): %v", key, len(data), err)
	}
}

func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes (%s), want %d bytes (%s)", what, len(got), head(got), len(want), head(want))
	}
}

func head(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%x...", b[:16])
	}
	return fmt.Sprintf("%x", b)
}

func testPutIfAbsent(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	for _, n := range []int{1, 100, 64 << 10, h.MaxObjectBytes} {
		key := fmt.Sprintf("pia/%d", n)
		first := payload(key+"first", n)
		mustPutIfAbsent(t, st, key, first)
		err := st.PutIfAbsent(ctx, key, payload(key+"second", n+1))
		if !errors.Is(err, stream.ErrAlreadyExists) {
			t.Fatalf("second PutIfAbsent(%q): got %v, want ErrAlreadyExists", key, err)
		}
		checkBytes(t, "after losing PutIfAbsent "+key, mustGet(t, st, key, 0, -1), first)
	}
}

func testPut(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	key := "hint/h"
	for i, n := range []int{10, 1000, 3} {
		data := payload(fmt.Sprint(key, i), n)
		if err := st.Put(ctx, key, data); err != nil {
			t.Fatalf("Put(%q) #%d: %v", key, i, err)
		}
		checkBytes(t, fmt.Sprintf("Get after Put #%d", i), mustGet(t, st, key, 0, -1), data)
		size, err := st.Stat(ctx, key)
		if err != nil || size != int64(n) {
			t.Fatalf("Stat(%q) after Put #%d = %d, %v; want %d", key, i, size, err, n)
		}
	}
	// Put over a key made by PutIfAbsent overwrites it too.
	mustPutIfAbsent(t, st, "hint/p", []byte("old"))
	if err := st.Put(ctx, "hint/p", []byte("new!")); err != nil {
		t.Fatalf("Put over PutIfAbsent key: %v", err)
	}
	checkBytes(t, "Get after Put over PutIfAbsent", mustGet(t, st, "hint/p", 0, -1), []byte("new!"))
}

func testEmptyObject(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	mustPutIfAbsent(t, st, "empty", nil)
	if size, err := st.Stat(ctx, "empty"); err != nil || size != 0 {
		t.Fatalf("Stat(empty) = %d, %v; want 0, nil", size, err)
	}
	if b := mustGet(t, st, "empty", 0, -1); len(b) != 0 {
		t.Fatalf("Get(empty) = %d bytes, want 0", len(b))
	}
	if err := st.PutIfAbsent(ctx, "empty", []byte("x")); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatalf("PutIfAbsent over an empty object: got %v, want ErrAlreadyExists", err)
	}
}

func testRangeRead(t *testing.T, h Harness, st chunked.Storage) {
	const n = 1000
	data := payload("range", n)
	mustPutIfAbsent(t, st, "r/obj", data)
	cases := []struct {
		off, length int64
		want        []byte
	}{
		{0, -1, data},
		{0, n, data},
		{0, n + 50, data},
		{0, 1, data[:1]},
		{1, 10, data[1:11]},
		{500, -1, data[500:]},
		{990, 100, data[990:]},
		{n - 1, -1, data[n-1:]},
		{n - 1, 1, data[n-1:]},
		{n, -1, nil},     // at the end
		{n, 10, nil},     // at the end
		{n + 1, -1, nil}, // past the end
		{n + 1000, 5, nil},
		{0, 0, nil}, // zero length
		{500, 0, nil},
		{n, 0, nil},
	}
	for _, c := range cases {
		got := mustGet(t, st, "r/obj", c.off, c.length)
		checkBytes(t, fmt.Sprintf("Get(off=%d, length=%d)", c.off, c.length), got, c.want)
	}
	// Many small reads reassemble the object.
	var all []byte
	for off := int64(0); off < n; off += 77 {
		all = append(all, mustGet(t, st, "r/obj", off, 77)...)
	}
	checkBytes(t, "reassembled 77-byte reads", all, data)
}

func testStat(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	for _, n := range []int{0, 1, 4096, 100_001} {
		key := fmt.Sprintf("stat/%d", n)
		mustPutIfAbsent(t, st, key, payload(key, n))
		size, err := st.Stat(ctx, key)
		if err != nil || size != int64(n) {
			t.Fatalf("Stat(%q) = %d, %v; want %d, nil", key, size, err, n)
		}
	}
}

func testNotFound(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	mustPutIfAbsent(t, st, "nf/present", []byte("x"))
	for _, key := range []string{"nf/absent", "nf/present/below", "nf", "nf/presen", "other/absent"} {
		if _, err := st.Get(ctx, key, 0, -1); !errors.Is(err, stream.ErrNotFound) {
			t.Errorf("Get(%q): got %v, want ErrNotFound", key, err)
		}
		if _, err := st.Get(ctx, key, 5, 0); !errors.Is(err, stream.ErrNotFound) {
			t.Errorf("Get(%q, 5, 0): got %v, want ErrNotFound", key, err)
		}
		if _, err := st.Stat(ctx, key); !errors.Is(err, stream.ErrNotFound) {
			t.Errorf("Stat(%q): got %v, want ErrNotFound", key, err)
		}
	}
	// Sentinel errors are wrapped with context, never bare and never
	// another sentinel as well.
	_, err := st.Stat(ctx, "nf/absent")
	if err == stream.ErrNotFound {
		t.Errorf("Stat error is the bare sentinel; want it wrapped with the key: %v", err)
	} else if err != nil && !strings.Contains(err.Error(), "nf/absent") {
		t.Errorf("Stat error does not name the key: %v", err)
	}
	err = st.PutIfAbsent(ctx, "nf/present", []byte("y"))
	if errors.Is(err, stream.ErrUnavailable) || errors.Is(err, stream.ErrNotFound) {
		t.Errorf("PutIfAbsent on a taken key also matches another sentinel: %v", err)
	}
}

func testDelete(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	keys := []string{"d/a", "d/b", "d/c/d"}
	for _, k := range keys {
		mustPutIfAbsent(t, st, k, []byte(k))
	}
	if err := st.Delete(ctx, []string{"d/a", "d/never", "d/c/d"}); err != nil {
		t.Fatalf("Delete with an absent key: %v", err)
	}
	for _, k := range []string{"d/a", "d/c/d"} {
		if _, err := st.Stat(ctx, k); !errors.Is(err, stream.ErrNotFound) {
			t.Fatalf("Stat(%q) after Delete: got %v, want ErrNotFound", k, err)
		}
	}
	checkBytes(t, "untouched key after Delete", mustGet(t, st, "d/b", 0, -1), []byte("d/b"))
	// Idempotent: deleting again, and deleting nothing, succeed.
	for _, ks := range [][]string{{"d/a", "d/c/d"}, nil, {}} {
		if err := st.Delete(ctx, ks); err != nil {
			t.Fatalf("Delete(%q) again: %v", ks, err)
		}
	}
	// A deleted key can be created again, with new bytes.
	mustPutIfAbsent(t, st, "d/a", []byte("again"))
	checkBytes(t, "recreated key", mustGet(t, st, "d/a", 0, -1), []byte("again"))
	mustPutIfAbsent(t, st, "d/c/d", []byte("again2"))
	checkBytes(t, "recreated nested key", mustGet(t, st, "d/c/d", 0, -1), []byte("again2"))
	got, err := st.List(ctx, "d/", "", 0)
	if err != nil {
		t.Fatalf("List after Delete: %v", err)
	}
	if want := []string{"d/a", "d/b", "d/c/d"}; !slices.Equal(got, want) {
		t.Fatalf("List after Delete and recreate = %q, want %q", got, want)
	}
}

func testNestedKeys(t *testing.T, h Harness, st chunked.Storage) {
	// A key and keys below it (as a path prefix) coexist: stream names may
	// nest ("a" and "a/b"), so the engine's keys do.
	keys := []string{
		"n/a", "n/a/b", "n/a/b/c", "n/a.b", "n/a-b/c", "n/a_b", "n/A", "n/0",
		"n/deep/1/2/3/4/5/6/7/8/9/leaf", "n/x/g/00000000000000000001",
		"n/x/g/00000000000000000001/g/00000000000000000000", "n/.hidden", "n/..dots", "n/...",
	}
	for _, k := range keys {
		mustPutIfAbsent(t, st, k, []byte("v:"+k))
	}
	for _, k := range keys {
		checkBytes(t, "Get "+k, mustGet(t, st, k, 0, -1), []byte("v:"+k))
	}
	got, err := st.List(t.Context(), "n/", "", 0)
	if err != nil {
		t.Fatalf("List(n/): %v", err)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List(n/) =\n%q\nwant\n%q", got, want)
	}
}

func testList(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	var all []string
	for i := 0; i < 30; i++ {
		all = append(all, fmt.Sprintf("s/%d/c/%020d", i%3, i))
	}
	all = append(all, "s/0/m/00000000000000000001", "s/0/hint", "s/1-x", "s/1.x", "s/1/z", "t/other", "s0/x")
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, k := range all {
		mustPutIfAbsent(t, st, k, []byte(k))
	}
	slices.Sort(all)
	under := func(prefix, after string, limit int) []string {
		var r []string
		for _, k := range all {
			if strings.HasPrefix(k, prefix) && k > after && (limit <= 0 || len(r) < limit) {
				r = append(r, k)
			}
		}
		return r
	}
	cases := []struct {
		prefix, after string
		limit         int
	}{
		{"", "", 0},
		{"s/", "", 0},
		{"s/0/", "", 0},
		{"s/0/c/", "", 0},
		{"s/1/", "", 0},
		{"s/0/", "s/0/c/00000000000000000009", 0},
		{"s/0/", "s/0/c/00000000000000000010", 0}, // after is not a key
		{"s/0/", "s/0/c/", 0},
		{"s/0/", "s/0/zzz", 0},
		{"s/", "", 5},
		{"s/", "s/1", 4},
		{"s/2/c/", "s/2/c/00000000000000000002", 1},
		{"", "s0", 0},
		{"", "a", 3},
		{"s/0/c/", "", 1000},
		{"nothing/", "", 0},
		{"s/0/c/00000000000000000000/", "", 0},
	}
	for _, c := range cases {
		got, err := st.List(ctx, c.prefix, c.after, c.limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", c.prefix, c.after, c.limit, err)
		}
		want := under(c.prefix, c.after, c.limit)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("List(%q, %q, %d) =\n%q\nwant\n%q", c.prefix, c.after, c.limit, got, want)
		}
	}
	// Paging with after+limit visits every key once, in order.
	var paged []string
	after := ""
	for {
		page, err := st.List(ctx, "s/", after, 7)
		if err != nil {
			t.Fatalf("List page after %q: %v", after, err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 7 {
			t.Fatalf("List with limit 7 returned %d keys", len(page))
		}
		paged = append(paged, page...)
		after = page[len(page)-1]
	}
	if want := under("s/", "", 0); !slices.Equal(paged, want) {
		t.Fatalf("paged List(s/) =\n%q\nwant\n%q", paged, want)
	}
}

func testConcurrentPutIfAbsent(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	for trial := 0; trial < 10; trial++ {
		key := fmt.Sprintf("cp/%d", trial)
		var wg sync.WaitGroup
		results := make([]error, h.Goroutines)
		for g := range h.Goroutines {
			wg.Go(func() {
				results[g] = st.PutIfAbsent(ctx, key, payload(fmt.Sprint(key, g), 1000+g*997))
			})
		}
		wg.Wait()
		winner := -1
		for g, err := range results {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("%s: goroutines %d and %d both won PutIfAbsent", key, winner, g)
				}
				winner = g
			case errors.Is(err, stream.ErrAlreadyExists):
			default:
				t.Fatalf("%s: goroutine %d: %v", key, g, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no goroutine won PutIfAbsent", key)
		}
		checkBytes(t, key+" holds the winner's bytes", mustGet(t, st, key, 0, -1),
			payload(fmt.Sprint(key, winner), 1000+winner*997))
	}
}

func testConcurrentDistinctPuts(t *testing.T, h Harness, st chunked.Storage) {
	ctx := t.Context()
	const perG = 8
	var wg sync.WaitGroup
	errs := make(chan error, h.Goroutines*perG)
	for g := range h.Goroutines {
		wg.Go(func() {
			for i := range perG {
				key := fmt.Sprintf("cd/%d/c/%020d", g%4, g*perG+i)
				if err := st.PutIfAbsent(ctx, key, payload(key, 64+i*4096)); err != nil {
					errs <- fmt.Errorf("PutIfAbsent(%q): %w", key, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := st.List(ctx, "cd/", "", 0)
	if err != nil {
		t.Fatalf("List(cd/): %v", err)
	}
	if len(got) != h.Goroutines*perG {
		t.Fatalf("List(cd/) found %d keys, want %d", len(got), h.Goroutines*perG)
	}
	for _, key := range got {
		var n int
		if _, err := fmt.Sscanf(key[len("cd/0/c/"):], "%d", &n); err != nil {
			t.Fatalf("unexpected key %q", key)
		}
		i := n % perG
		checkBytes(t, "Get "+key, mustGet(t, st, key, 0, -1), payload(key, 64+i*4096))
	}
}

func testTwoHandles(t *testing.T, h Harness, _ chunked.Storage) {
	// Two Storages opened on the same config (as two hosts would) see each
	// other's writes at once, and put-if-absent is exclusive between them.
	ctx := t.Context()
	config := h.NewConfig(t)
	a, b := open(t, h, config), open(t, h, config)
	mustPutIfAbsent(t, a, "two/k", []byte("from a"))
	checkBytes(t, "b reads a's put", mustGet(t, b, "two/k", 0, -1), []byte("from a"))
	if err := b.PutIfAbsent(ctx, "two/k", []byte("from b")); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatalf("b.PutIfAbsent over a's key: got %v, want ErrAlreadyExists", err)
	}
	if err := b.Put(ctx, "two/h", []byte("hint from b")); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "a reads b's Put", mustGet(t, a, "two/h", 0, -1), []byte("hint from b"))
	if err := a.Delete(ctx, []string{"two/k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "two/k"); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("b.Stat after a.Delete: got %v, want ErrNotFound", err)
	}
	got, err := b.List(ctx, "two/", "", 0)
	if err != nil || !slices.Equal(got, []string{"two/h"}) {
		t.Fatalf("b.List(two/) = %q, %v; want [two/h]", got, err)
	}
}

func testRequestStats(t *testing.T, h Harness, st chunked.Storage) {
	// Optional: a Storage that counts its requests (chunked.StatsReporter)
	// counts at least the calls made and the payload bytes moved.
	sr, ok := st.(chunked.StatsReporter)
	if !ok {
		t.Skip("the Storage does not implement chunked.StatsReporter (optional)")
	}
	ctx := t.Context()
	before := sr.RequestStats()
	var written, read int64
	for i, n := range []int{10, 1000, 70_000} {
		key := fmt.Sprintf("stats/%d", i)
		mustPutIfAbsent(t, st, key, payload(key, n))
		written += int64(n)
		read += int64(len(mustGet(t, st, key, 0, -1)))
	}
	if _, err := st.List(ctx, "stats/", "", 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, []string{"stats/0"}); err != nil {
		t.Fatal(err)
	}
	after := sr.RequestStats()
	d := chunked.RequestStats{
		Puts: after.Puts - before.Puts, Gets: after.Gets - before.Gets, Lists: after.Lists - before.Lists,
		Deletes: after.Deletes - before.Deletes, BytesWritten: after.BytesWritten - before.BytesWritten,
		BytesRead: after.BytesRead - before.BytesRead,
	}
	if d.Puts < 3 || d.Gets < 3 || d.Lists < 1 || d.Deletes < 1 || d.BytesWritten < written || d.BytesRead < read {
		t.Fatalf("RequestStats moved by %+v after 3 puts (%d bytes), 3 gets (%d bytes), 1 list, 1 delete", d, written, read)
	}
}

// testEngineIndexPages runs the chunked engine on two handles of the
// Storage with small index pages and frequent checkpoints, so that its
// manifests name index pages (objects under "x/") and a trim collects
// some: what a stream of millions of chunks does with the defaults.
func testEngineIndexPages(t *testing.T, h Harness, _ chunked.Storage) {
	ctx := t.Context()
	config := h.NewConfig(t)
	newStore := func(st chunked.Storage) *stream.Store {
		s, err := chunked.NewStore(openHandle{st}, chunked.Options{Driver: "storagetest", CheckpointChunks: 4, IndexPageEntries: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(t, h, config), open(t, h, config)
	sa, sb := newStore(a), newStore(b)
	appendAll := func(w *stream.Stream, from, to int) {
		for i := from; i < to; i++ {
			if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(fmt.Sprint(i), 100)}); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	readAll := func(s *stream.Stream, from, to int) {
		t.Helper()
		for off := int64(from); off < int64(to); {
			bs, err := s.Fetch(ctx, off, stream.NoEnd, 0)
			if err != nil || len(bs) == 0 {
				t.Fatalf("fetch %d (want up to %d): %d batches, %v", off, to, len(bs), err)
			}
			for _, bt := range bs {
				checkBytes(t, fmt.Sprintf("batch %d", bt.BaseOffset), bt.Payload, payload(fmt.Sprint(bt.BaseOffset), 100))
				off = bt.EndOffset()
			}
		}
		if n := s.NextOffset(); n != int64(to) {
			t.Fatalf("next offset %d, want %d", n, to)
		}
	}
	w, err := sa.Open(ctx, "pages/s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(w, 0, 60)
	r, err := sb.Open(ctx, "pages/s", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(w, 60, 120)
	if err := w.Trim(ctx, 60); err != nil {
		t.Fatal(err)
	}
	readAll(r, 60, 120) // the reader's chain had pages the trim collected
	_ = r.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	keys, err := b.List(ctx, "pages/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "/x/") }) {
		t.Fatalf("no index page among the stream's %d objects", len(keys))
	}
	w2, err := sb.Open(ctx, "pages/s", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(w2, 120, 140)
	readAll(w2, 60, 140)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
}

// openHandle is a Storage whose Close is left to the test that opened it.
type openHandle struct{ chunked.Storage }

func (openHandle) Close() error { return nil }
