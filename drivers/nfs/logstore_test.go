package nfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/drivers/nfs/internal/lazyfs"
	"github.com/stratastream/strata/internal/trusted"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/wal"
)

// logHarness runs the suite on LogStores over one directory: the second
// store is another LogStore on it, and a crash drops the store without
// Close (its sessions go on as stale writers) and opens a new one.
func logHarness(t *testing.T, opts LogOptions) conformance.Harness {
	root := freshRoot(t)
	open := func(t conformance.T) *stream.Store {
		s, err := OpenLogStore(root, opts)
		if err != nil {
			t.Fatalf("OpenLogStore: %v", err)
		}
		return s
	}
	return conformance.Harness{
		NewStore: open,
		Second:   func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
		Crash:    func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
		// The fault family moves the directory away and back.
		BackendCtl: drivertest.BackendCtl("nfs", "--root", root),
	}
}

// TestLogStoreConformance runs the stream suite on the LogStore.
func TestLogStoreConformance(t *testing.T) { conformance.Run(t, logHarness(t, LogOptions{})) }

// TestLogStoreConformanceSmallSegments runs it with 4 KiB segments,
// preallocation steps and index points every 700 bytes, so that appends
// roll segments and trims free and punch them.
func TestLogStoreConformanceSmallSegments(t *testing.T) {
	conformance.Run(t, logHarness(t, LogOptions{SegmentBytes: 4 << 10, PreallocBytes: 1 << 10, IndexBytes: 700}))
}

// TestConformanceStreamSetsLogStore runs the stream and SharedLog suites on
// virtual streams over the driver linked in with their WALs in a LogStore
// in the same root (strata serve's embedded default), second stores in
// driver processes of their own; the fault hook moves the whole root
// away, WALs and all.
func TestConformanceStreamSetsLogStore(t *testing.T) {
	root := freshRoot(t)
	c := drivertest.Conformance{
		Driver: DriverName, Open: Open, Config: configFor(root),
		BackendCtl: drivertest.BackendCtl("nfs", "--root", root),
	}
	var mu sync.Mutex
	var logs []*LogStore
	h := conformance.WrapHarness(c.InProcess(t), func(t conformance.T, base *stream.Store) *stream.Store {
		ls, err := NewLogStore(LogStoreDir(root), LogOptions{SegmentBytes: 256 << 10})
		if err != nil {
			t.Fatalf("NewLogStore: %v", err)
		}
		mu.Lock()
		logs = append(logs, ls)
		mu.Unlock()
		ws := stream.NewStore(ls)
		s, err := wal.NewStore(base, wal.Options{WALStore: ws})
		if err != nil {
			t.Fatalf("wal.NewStore: %v", err)
		}
		return stream.NewStore(s)
	})
	t.Run("stream", func(t *testing.T) { conformance.Run(t, h) })
	t.Run("sharedlog", func(t *testing.T) { sharedlogtest.Run(t, h) })
	// The WALs were in the LogStores, not in the base.
	var appends int64
	for _, ls := range logs {
		appends += ls.stats.puts.Load()
	}
	if appends < 1000 {
		t.Errorf("the LogStores wrote %d times; the WALs should have been there", appends)
	}
	t.Logf("LogStores: %d, writes %d", len(logs), appends)
}

func appendOne(t *testing.T, st *stream.Stream, payload string) stream.AppendResult {
	t.Helper()
	r, err := st.Append(context.Background(), stream.Batch{Count: 1, Payload: []byte(payload)}).Result()
	if err != nil {
		t.Fatalf("append %q: %v", payload, err)
	}
	return r
}

// TestLogStoreTornTail: bytes past the last whole frame (a torn write, or
// the debris of a crashed session) end the log there (L4); a frame below a
// seal that no longer checks is ErrCorrupt, never other bytes.
func TestLogStoreTornTail(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "a/b", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	appendOne(t, st, "one")
	appendOne(t, st, "two")
	// A crash: the session is dropped, and a torn frame follows its last.
	seg := filepath.Join(root, dirName("a/b"), segName(1, 0))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := encodeFrame(frameBatch, 2, stream.Batch{Count: 1, Payload: []byte("three")}, stream.Checksum([]byte("three")))
	end := int64(2 * len(encodeFrame(frameBatch, 0, stream.Batch{Count: 1, Payload: []byte("one")}, 0)))
	if _, err := f.WriteAt(torn[:len(torn)-3], end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st2, err := s.Open(ctx, "a/b", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := st2.NextOffset(); n != 2 {
		t.Fatalf("next offset after a torn tail: %d, want 2", n)
	}
	appendOne(t, st2, "three")
	bs, err := st2.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 3 || string(bs[2].Payload) != "three" {
		t.Fatalf("fetch: %d batches, %v", len(bs), err)
	}
	// Flip a byte of "two", below open 1's seal: ErrCorrupt.
	f, _ = os.OpenFile(seg, os.O_RDWR, 0)
	if _, err := f.WriteAt([]byte("X"), end-6); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := s.Open(ctx, "a/b", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(ctx, 1, stream.NoEnd, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("fetch of a corrupted sealed frame: %v, want ErrCorrupt", err)
	}
	if bs, err := r.Fetch(ctx, 2, stream.NoEnd, 0); err != nil || len(bs) != 1 || string(bs[0].Payload) != "three" {
		t.Fatalf("fetch past it: %d batches, %v", len(bs), err)
	}
}

// TestLogStoreZombieRace: a writer appending without pause while other
// stores take the stream over, again and again. Every append any session
// acknowledged is in the final log, once, at its offset (L2, L3).
func TestLogStoreZombieRace(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	type ack struct {
		off     int64
		payload string
	}
	var acks []ack
	var mu sync.Mutex
	for round := range rounds {
		s, err := OpenLogStore(root, LogOptions{SegmentBytes: 8 << 10, PreallocBytes: 2 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, err := s.Open(ctx, "z", stream.OpenOptions{Epoch: uint64(round), CreateIfMissing: true})
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		// The previous round's writer is still appending: fence it now.
		go func(st *stream.Stream, round int) {
			for i := 0; ; i++ {
				p := fmt.Sprintf("r%d-%d", round, i)
				r, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte(p)}).Result()
				if err != nil {
					return
				}
				mu.Lock()
				acks = append(acks, ack{r.BaseOffset, p})
				mu.Unlock()
			}
		}(st, round)
		time.Sleep(time.Duration(2+round%7) * time.Millisecond)
	}
	s, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "z", stream.OpenOptions{Epoch: uint64(rounds)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the last writer's acks are in
	mu.Lock()
	defer mu.Unlock()
	log := map[int64]string{}
	seen := map[string]bool{}
	for pos := int64(0); pos < st.NextOffset(); {
		bs, err := st.Fetch(ctx, pos, stream.NoEnd, 0)
		if err != nil || len(bs) == 0 {
			t.Fatalf("fetch at %d of %d: %v", pos, st.NextOffset(), err)
		}
		for _, b := range bs {
			if b.BaseOffset != pos || seen[string(b.Payload)] {
				t.Fatalf("batch %q at %d, want offset %d, once", b.Payload, b.BaseOffset, pos)
			}
			seen[string(b.Payload)] = true
			log[pos] = string(b.Payload)
			pos = b.EndOffset()
		}
	}
	for _, a := range acks {
		if log[a.off] != a.payload {
			t.Fatalf("acked %q at %d: the log has %q", a.payload, a.off, log[a.off])
		}
	}
	if len(acks) < rounds {
		t.Fatalf("only %d acks in %d rounds: the test checked little", len(acks), rounds)
	}
	t.Logf("%d takeovers, %d acked appends, all in the log of %d", rounds, len(acks), len(log))
}

// TestLogStoreReaderRacesTakeover: a reader lists the directory, then a
// takeover seals the last open and its stale session writes a frame past
// the seal before the reader scans that open. The reader must not take
// the frame (L3: what a read of the last open shows is kept only if no
// later open record exists after it); before that check it returned the
// stale batch at the offset the new session's first append took.
func TestLogStoreReaderRacesTakeover(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s1, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	old, err := s1.Open(ctx, "r", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	appendOne(t, old, "acked")
	var cur *stream.Stream
	var stale error
	hooked := false
	loadHook = func(string) {
		if hooked {
			return
		}
		hooked = true
		// Between the reader's listing and its scan: the takeover, then
		// the stale session's append past the seal (fenced), then the
		// new session's own.
		if cur, err = s2.Open(ctx, "r", stream.OpenOptions{Epoch: 2}); err != nil {
			t.Errorf("takeover: %v", err)
			return
		}
		_, stale = old.Append(ctx, stream.Batch{Count: 1, Payload: []byte("stale")}).Result()
		appendOne(t, cur, "new")
	}
	defer func() { loadHook = nil }()
	r, err := s1.Open(ctx, "r", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if !hooked || cur == nil {
		t.Fatal("the takeover did not run inside the reader's open")
	}
	if !errors.Is(stale, stream.ErrFenced) {
		t.Fatalf("stale session's append: %v, want ErrFenced", stale)
	}
	// A fetch inside the view the open read does not refresh it (the
	// stream's offsets would).
	bs, err := r.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, fmt.Sprintf("%d:%s", b.BaseOffset, b.Payload))
	}
	if want := []string{"0:acked", "1:new"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("reader sees %q, want %q", got, want)
	}
}

// TestLogStoreReusesSegments: segments a trim frees are kept as spares
// and written again as new segments; their old frames never read as part
// of the log, for the session, a reader, or the next open.
func TestLogStoreReusesSegments(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := OpenLogStore(root, LogOptions{SegmentBytes: 4 << 10, PreallocBytes: 1 << 10, IndexBytes: 500, SpareSegments: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "r", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, dirName("r"))
	payload := func(i int) string { return fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 200)) }
	spares, reused := 0, 0
	for i := range 400 {
		appendOne(t, st, payload(i))
		if i%20 != 19 {
			continue
		}
		if err := st.Trim(ctx, int64(i-30)); err != nil && i >= 30 {
			t.Fatalf("trim to %d: %v", i-30, err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "r.") {
				spares++
			}
		}
	}
	ls := s.Driver().(*LogStore)
	for ss := range ls.sessions {
		reused = int(ss.spareN) - len(ss.spares)
	}
	if spares == 0 || reused == 0 {
		t.Fatalf("spares seen %d, reused %d: the test did not reuse a segment", spares, reused)
	}
	check := func(who string, r *stream.Stream) {
		t.Helper()
		pos := r.StartOffset()
		if pos != 369 || r.NextOffset() != 400 {
			t.Fatalf("%s: [%d, %d), want [369, 400)", who, pos, r.NextOffset())
		}
		for pos < 400 {
			bs, err := r.Fetch(ctx, pos, stream.NoEnd, 0)
			if err != nil || len(bs) == 0 {
				t.Fatalf("%s: fetch at %d: %d batches, %v", who, pos, len(bs), err)
			}
			for _, b := range bs {
				if b.BaseOffset != pos || string(b.Payload) != payload(int(pos)) {
					t.Fatalf("%s: batch at %d (want %d): %.4s", who, b.BaseOffset, pos, b.Payload)
				}
				pos = b.EndOffset()
			}
		}
	}
	check("writer", st)
	r, err := s.Open(ctx, "r", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	check("reader", r)
	s2, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	next, err := s2.Open(ctx, "r", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	check("next open", next)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "r.") {
			t.Fatalf("spare %s left after the next open", e.Name())
		}
	}
	t.Logf("%d spares seen after trims, %d reused", spares, reused)
}

// TestLogStoreSparesExpire: spares a session did not reuse within
// spareTTL are removed at its next trim, keeping only what that trim
// freed; the log reads the same.
func TestLogStoreSparesExpire(t *testing.T) {
	ctx := context.Background()
	_, st, dir := smallSegments(t, 8, "e")
	payload := func(i int) string { return fmt.Sprintf("%04d-%s", i, strings.Repeat("y", 200)) }
	var last stream.AppendResult
	for i := range 160 {
		last = appendOne(t, st, payload(i))
	}
	if err := st.Trim(ctx, 150); err != nil {
		t.Fatal(err)
	}
	first := spareFiles(t, dir)
	if len(first) != 8 {
		t.Fatalf("spares after the first trim: %v; want SpareSegments (8)", first)
	}
	old := spareTTL
	spareTTL = 50 * time.Millisecond
	t.Cleanup(func() { spareTTL = old })
	// Two more segments take two spares; the other six grow stale. The
	// second trim frees segments again: the stale spares go, what it
	// freed stays.
	for i := 160; i < 200; i++ {
		last = appendOne(t, st, payload(i))
	}
	if n := len(spareFiles(t, dir)); n < 4 || n > 7 {
		t.Fatalf("%d spares before the second trim; want some taken, some left to expire", n)
	}
	time.Sleep(2 * spareTTL)
	if err := st.Trim(ctx, 195); err != nil {
		t.Fatal(err)
	}
	second := spareFiles(t, dir)
	for _, name := range second {
		if slices.Contains(first, name) {
			t.Fatalf("spare %s from the first trim outlived spareTTL (spares now %v)", name, second)
		}
	}
	if len(second) == 0 {
		t.Fatalf("no spare after the second trim: it freed segments, and they are spares until they expire")
	}
	bs, err := st.Fetch(ctx, 195, stream.NoEnd, 0)
	if err != nil || len(bs) != int(last.NextOffset-195) || string(bs[0].Payload) != payload(195) {
		t.Fatalf("fetch from the trim point: %d batches, %v", len(bs), err)
	}
	t.Logf("spares after the first trim %v, after the second %v", first, second)
}

// TestLogStoreNoSpareRename: on a file system that refuses renameat2
// RENAME_NOREPLACE (EINVAL), segments a trim frees are removed, the
// store stops trying spares, and the log reads as before, for the session
// and for the next open.
func TestLogStoreNoSpareRename(t *testing.T) {
	ctx := context.Background()
	calls := 0
	old := renameSpare
	renameSpare = func(int, string, string) error { calls++; return syscall.EINVAL }
	t.Cleanup(func() { renameSpare = old })
	s, st, dir := smallSegments(t, 0, "n")
	payload := func(i int) string { return fmt.Sprintf("%04d-%s", i, strings.Repeat("z", 200)) }
	for round := range 3 {
		for i := round * 60; i < (round+1)*60; i++ {
			appendOne(t, st, payload(i))
		}
		if err := st.Trim(ctx, int64((round+1)*60-5)); err != nil {
			t.Fatal(err)
		}
		if sp := spareFiles(t, dir); len(sp) != 0 {
			t.Fatalf("round %d: spares %v on a file system without RENAME_NOREPLACE", round, sp)
		}
	}
	if calls != 1 || !s.Driver().(*LogStore).noSpares.Load() {
		t.Fatalf("spare renames tried %d times (want 1, then none), noSpares %v", calls, s.Driver().(*LogStore).noSpares.Load())
	}
	ents, _ := os.ReadDir(dir)
	segs := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "d.") {
			segs++
		}
	}
	if segs > 2 {
		t.Fatalf("%d segments left after trims to the last 5 of 180 batches; want the freed ones removed", segs)
	}
	check := func(who string, r *stream.Stream) {
		t.Helper()
		bs, err := r.Fetch(ctx, 175, stream.NoEnd, 0)
		if err != nil || len(bs) != 5 {
			t.Fatalf("%s: fetch from 175: %d batches, %v", who, len(bs), err)
		}
		for k, b := range bs {
			if b.BaseOffset != int64(175+k) || string(b.Payload) != payload(175+k) {
				t.Fatalf("%s: batch %d at %d: %.4s", who, k, b.BaseOffset, b.Payload)
			}
		}
	}
	check("writer", st)
	next, err := s.Open(ctx, "n", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	check("next open", next)
}

// spareFiles lists the spare segments (r.*) in a stream directory.
func spareFiles(t *testing.T, dir string) []string {
	t.Helper()
	return slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return !strings.HasPrefix(n, "r.") })
}

// smallSegments opens a LogStore of 4 KiB segments in a temporary
// directory with spares spares, and in it stream name at epoch 1; it
// returns the stream and its directory. The store closes with the test.
func smallSegments(t *testing.T, spares int, name string) (*stream.Store, *stream.Stream, string) {
	t.Helper()
	root := t.TempDir()
	s, err := OpenLogStore(root, LogOptions{SegmentBytes: 4 << 10, PreallocBytes: 1 << 10, IndexBytes: 500, SpareSegments: spares})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	st, err := s.Open(context.Background(), name, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, st, filepath.Join(root, dirName(name))
}

// TestLogStoreTrimFreesSegments: a trim removes the segments wholly below
// the new start, of this session and of earlier opens.
func TestLogStoreTrimFreesSegments(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := OpenLogStore(root, LogOptions{SegmentBytes: 4 << 10, PreallocBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	segs := func() int {
		ents, _ := os.ReadDir(filepath.Join(root, dirName("t")))
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "d.") {
				n++
			}
		}
		return n
	}
	payload := strings.Repeat("x", 1000)
	st, _ := s.Open(ctx, "t", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	for range 20 {
		appendOne(t, st, payload)
	}
	st2, err := s.Open(ctx, "t", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	var last stream.AppendResult
	for range 20 {
		last = appendOne(t, st2, payload)
	}
	before := segs()
	if err := st2.Trim(ctx, last.BaseOffset); err != nil {
		t.Fatal(err)
	}
	if after := segs(); after > 2 || before < 8 {
		t.Fatalf("segments: %d before the trim, %d after; want many, then at most 2", before, after)
	}
	if err := st.Trim(ctx, 5); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("trim by the fenced session: %v, want ErrFenced", err)
	}
	bs, err := st2.Fetch(ctx, last.BaseOffset, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 {
		t.Fatalf("fetch at the new start: %d batches, %v", len(bs), err)
	}
	// A reader, and then a new owner, of the open whose first segments
	// the trim removed: its log goes on in the segment its trim record
	// names, to its end.
	r, err := s.Open(ctx, "t", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := r.StartOffset(), r.NextOffset(); lo != last.BaseOffset || hi != last.NextOffset {
		t.Fatalf("a reader after the trim sees [%d, %d), want [%d, %d)", lo, hi, last.BaseOffset, last.NextOffset)
	}
	more := appendOne(t, st2, payload)
	st3, err := s.Open(ctx, "t", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := st3.StartOffset(), st3.NextOffset(); lo != last.BaseOffset || hi != more.NextOffset {
		t.Fatalf("the new owner after the trim holds [%d, %d), want [%d, %d)", lo, hi, last.BaseOffset, more.NextOffset)
	}
	bs, err = st3.Fetch(ctx, last.BaseOffset, stream.NoEnd, 0)
	if err != nil || len(bs) != 2 || bs[1].BaseOffset != more.BaseOffset {
		t.Fatalf("the new owner's fetch from the trimmed start: %d batches, %v", len(bs), err)
	}
	bs, err = r.Fetch(ctx, more.BaseOffset, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || bs[0].BaseOffset != more.BaseOffset {
		t.Fatalf("the reader's fetch of the append after the trim: %d batches, %v", len(bs), err)
	}
}

// logOpener opens a LogStore on root (which it must create).
func logOpener(opts LogOptions) func(context.Context, string) (*stream.Store, error) {
	return func(_ context.Context, root string) (*stream.Store, error) { return OpenLogStore(root, opts) }
}

// TestLogStorePowerLoss: the power cycles of TestPowerLoss on a LogStore
// with small segments (cycles roll them): no append acknowledged before a
// cut is lost, the store's root made by the store itself.
func TestLogStorePowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("power cycles through a FUSE layer: full tier")
	}
	res := powerLossCycles(t, powerLossRuns(), logOpener(LogOptions{SegmentBytes: 16 << 10, PreallocBytes: 4 << 10}), 3)
	t.Logf("%d power cycles, %d acks, %d lost", res.cycles, res.acks, res.lost)
	if res.lost > 0 {
		t.Fatalf("%d acked appends lost at power cuts; first: %s", res.lost, res.firstLoss)
	}
}

// TestLogStorePowerLossCatchesSkippedFsync: with NoFsync the same cycles
// lose acknowledged appends: the test above can fail.
func TestLogStorePowerLossCatchesSkippedFsync(t *testing.T) {
	if testing.Short() {
		t.Skip("power cycles through a FUSE layer: full tier")
	}
	res := powerLossCycles(t, 3, logOpener(LogOptions{NoFsync: true}), 4)
	t.Logf("NoFsync: %d power cycles, %d acks, %d lost; first: %s", res.cycles, res.acks, res.lost, res.firstLoss)
	if res.lost == 0 {
		t.Fatal("no acked append lost with NoFsync: the power-loss layer does not drop unsynced data")
	}
}

// TestLogStoreSealSurvivesPowerLoss: a session writes a frame and dies
// before its fdatasync (never acknowledging it); a new owner's seal takes
// that frame in (L3 reads what is there). After a power cut the log must
// still read whole below the seal: the sealer flushes what it sealed.
func TestLogStoreSealSurvivesPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a power cut through a FUSE layer: full tier")
	}
	ctx := context.Background()
	fsys, mnt := lazyfs.MountTemp(t)
	root := filepath.Join(mnt, "wal")
	a, err := NewLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := stream.NewStore(a).Open(ctx, "w", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two", "three"} {
		appendOne(t, st, p)
	}
	// The frame of offset 3, written but never synced: the session dies.
	var w *logStream
	for ls := range a.sessions {
		w = ls
	}
	unsynced := []byte("four, never synced")
	if _, err := w.cur.WriteAt(encodeFrame(frameBatch, 3, stream.Batch{Count: 1, Payload: unsynced}, stream.Checksum(unsynced)), w.own.pos); err != nil {
		t.Fatal(err)
	}
	b, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := b.Open(ctx, "w", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := owner.NextOffset(); n != 4 {
		t.Fatalf("the new owner's log ends at %d; want 4 (the seal takes the written frame in)", n)
	}
	fsys.Cut()
	_ = b.Close()
	_ = a.Close()
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
	fsys.Restart()
	if err := fsys.Mount(mnt); err != nil {
		t.Fatal(err)
	}
	c, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Open(ctx, "w", stream.OpenOptions{Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	log, err := readLog(t, r)
	if err != nil {
		t.Fatalf("reading the log after the power cut: %v", err)
	}
	if len(log) != 4 || string(log[3].Payload) != string(unsynced) {
		t.Fatalf("after the cut: %d batches, want the 4 below the seal", len(log))
	}
}

// TestLogStoreCloseRacesAppends: closing the store while appends are being
// made fails them (ErrClosed, or ErrFenced for none), never panics, and
// leaves every acknowledged append readable by the next owner.
func TestLogStoreCloseRacesAppends(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	acked := map[int64]string{}
	var mu sync.Mutex
	for round := range 30 {
		s, err := OpenLogStore(root, LogOptions{NoFsync: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Open(ctx, "c", stream.OpenOptions{Epoch: uint64(round + 1), CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					p := fmt.Sprintf("r%d-g%d-%d", round, g, i)
					r, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte(p)}).Result()
					if err != nil {
						if !errors.Is(err, stream.ErrClosed) {
							t.Errorf("append racing Close: %v, want ErrClosed", err)
						}
						return
					}
					mu.Lock()
					acked[r.BaseOffset] = p
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	nextOwnerReads(t, root, "c", 100, acked)
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged: the test checked nothing")
	}
}

// TestLogStoreSyncFails: a failed fdatasync fails its groups and every
// group written after them, even one whose own fdatasync would pass, and
// every later append; the acknowledged appends are a prefix of the log,
// all of them read by the next owner.
func TestLogStoreSyncFails(t *testing.T) {
	ctx := context.Background()
	var syncs atomic.Int64
	old := syncSegment
	syncSegment = func(f *os.File) error {
		if syncs.Add(1) == 5 {
			return syscall.EIO
		}
		return old(f)
	}
	t.Cleanup(func() { syncSegment = old })
	root := t.TempDir()
	s, err := OpenLogStore(root, LogOptions{SegmentBytes: 64 << 10, PreallocBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "f", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	// Appends in flight all at once: the writer writes groups while the
	// syncer waits, so groups written after the failing ones are in the
	// pipe when it fails.
	const n = 3000
	payload := func(i int) string { return fmt.Sprintf("%05d-%s", i, strings.Repeat("s", 700)) }
	futs := make([]*stream.AppendFuture, n)
	for i := range futs {
		futs[i] = st.Append(ctx, stream.Batch{Count: 1, Payload: []byte(payload(i))})
		if i%100 == 99 {
			time.Sleep(time.Millisecond) // groups keep coming while one syncs
		}
	}
	acked := map[int64]string{}
	var firstErr error
	top := int64(-1)
	for i, f := range futs {
		r, err := f.Result()
		switch {
		case err == nil && firstErr != nil:
			t.Fatalf("append %d acknowledged at %d after an earlier one failed (%v): acknowledgements past a failed group", i, r.BaseOffset, firstErr)
		case err == nil:
			if r.BaseOffset != int64(i) {
				t.Fatalf("append %d acknowledged at %d", i, r.BaseOffset)
			}
			acked[r.BaseOffset] = payload(i)
			top = r.BaseOffset
		case firstErr == nil:
			firstErr = err
		}
	}
	if !errors.Is(firstErr, stream.ErrUnavailable) {
		t.Fatalf("appends failed with %v, want ErrUnavailable (the injected EIO)", firstErr)
	}
	if len(acked) == 0 {
		t.Fatal("no append acknowledged before the failed fdatasync; the test wants some")
	}
	if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("late")}).Result(); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("an append after the failure: %v, want the session's ErrUnavailable", err)
	}
	syncSegment = old
	nextOwnerReads(t, root, "f", 2, acked)
	t.Logf("%d of %d appends acknowledged (offsets 0..%d), then %v", len(acked), n, top, firstErr)
}

// nextOwnerReads opens stream name of the LogStore at root at epoch
// (a new owner, in a store of its own) and checks that it reads every
// acknowledged append (offset -> payload) as it was.
func nextOwnerReads(t *testing.T, root, name string, epoch uint64, acked map[int64]string) {
	t.Helper()
	s, err := OpenLogStore(root, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(context.Background(), name, stream.OpenOptions{Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	log, err := readLog(t, st)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, b := range log {
		got[b.BaseOffset] = string(b.Payload)
	}
	for off, p := range acked {
		if got[off] != p {
			t.Fatalf("acked %.12q at %d: the next owner reads %.12q", p, off, got[off])
		}
	}
}

// TestLogStoreTrimPunchesHoles: a trim frees the disk blocks of the live
// segment below its keep point, and every reader still reads the log
// from the new start: one opened before the trim (whose index points
// into the punched bytes), one opened after, and a new owner that seals
// the open whose bytes were punched.
func TestLogStoreTrimPunchesHoles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := OpenLogStore(root, LogOptions{IndexBytes: 64 << 10, SpareSegments: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(ctx, "p", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("y", 60<<10)
	var last stream.AppendResult
	for range 64 {
		last = appendOne(t, st, payload)
	}
	early, err := s.Open(ctx, "p", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	if bs, err := early.Fetch(ctx, 0, 1, 0); err != nil || len(bs) != 1 {
		t.Fatalf("an early reader's first fetch: %d batches, %v", len(bs), err)
	}
	seg := filepath.Join(root, dirName("p"), segName(1, 0))
	allocated := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(seg, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	before := allocated()
	if err := st.Trim(ctx, last.BaseOffset); err != nil {
		t.Fatal(err)
	}
	after := allocated()
	if before-after < 3<<20 {
		t.Fatalf("the segment had %d bytes allocated before the trim and %d after: want 3 MiB and more freed", before, after)
	}
	more := appendOne(t, st, "after the trim")
	late, err := s.Open(ctx, "p", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := s.Open(ctx, "p", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if owner.NextOffset() != more.NextOffset || owner.StartOffset() != last.BaseOffset {
		t.Fatalf("the new owner holds [%d, %d), want [%d, %d)", owner.StartOffset(), owner.NextOffset(), last.BaseOffset, more.NextOffset)
	}
	for name, r := range map[string]*stream.Stream{"early reader": early, "late reader": late, "new owner": owner} {
		bs, err := r.Fetch(ctx, last.BaseOffset, stream.NoEnd, 0)
		if err != nil || len(bs) == 0 || bs[0].BaseOffset != last.BaseOffset || string(bs[0].Payload) != payload {
			t.Fatalf("%s: fetch at the new start %d: %d batches, %v", name, last.BaseOffset, len(bs), err)
		}
		if _, err := r.Fetch(ctx, 0, stream.NoEnd, 0); !errors.Is(err, stream.ErrOffsetOutOfRange) {
			t.Fatalf("%s: fetch below the start: %v, want ErrOffsetOutOfRange", name, err)
		}
	}
	t.Logf("segment allocated %d bytes before the trim, %d after", before, after)
}

// TestLogStoreDirectWrites: groups of appends large enough go out with
// O_DIRECT, padded out to the alignment, between groups written through
// the page cache and across segment rolls and trims; a reader and a new
// owner read back every acknowledged append, with its bytes, at its
// offset.
func TestLogStoreDirectWrites(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	ls, err := NewLogStore(root, LogOptions{SegmentBytes: 3 << 20, IndexBytes: 200 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if ls.dioAlign.Load() == 0 {
		t.Fatalf("the file system under %s refuses O_DIRECT: this test needs one that takes it (ext4, xfs)", root)
	}
	s := stream.NewStore(ls)
	defer s.Close()
	st, err := s.Open(ctx, "d", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[int64][]byte{}
	for round := range 12 {
		var futs []*stream.AppendFuture
		var ps [][]byte
		for i := range 16 {
			size := 7 + (round*131+i*17)%300
			if i%3 == 0 {
				size = DirectMinBytes + i*1000 // big: its group goes out with O_DIRECT
			}
			p := bytes.Repeat([]byte{byte(round*16 + i)}, size)
			futs = append(futs, st.Append(ctx, stream.Batch{Count: 1, Payload: p}))
			ps = append(ps, p)
		}
		for i, f := range futs {
			r, err := f.Wait(ctx)
			if err != nil {
				t.Fatalf("round %d append %d: %v", round, i, err)
			}
			acked[r.BaseOffset] = ps[i]
		}
		if round == 8 {
			if err := st.Trim(ctx, st.NextOffset()-20); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ls.directWrites.Load() == 0 {
		t.Fatal("no group went out with O_DIRECT")
	}
	r, err := s.Open(ctx, "d", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := s.Open(ctx, "d", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*stream.Stream{"reader": r, "new owner": owner} {
		log, err := readLog(t, x)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := map[int64][]byte{}
		for _, b := range log {
			got[b.BaseOffset] = b.Payload
		}
		lo := x.StartOffset()
		for off, p := range acked {
			if off >= lo && !bytes.Equal(got[off], p) {
				t.Fatalf("%s: the append acked at %d (%d bytes) reads back as %d bytes", name, off, len(p), len(got[off]))
			}
		}
		if x.NextOffset() != int64(12*16) {
			t.Fatalf("%s: the log ends at %d, want %d", name, x.NextOffset(), 12*16)
		}
	}
	t.Logf("%d groups written with O_DIRECT (alignment %d)", ls.directWrites.Load(), ls.dioAlign.Load())
}

// TestSharedFileSystem: a FUSE mount is told apart from a local
// directory, so that strata serve keeps WAL files off it by default.
func TestSharedFileSystem(t *testing.T) {
	if got := SharedFileSystem(t.TempDir()); got != "" {
		t.Fatalf("a local directory is %q, want \"\"", got)
	}
	if testing.Short() {
		t.Skip("mounts a FUSE file system: full tier")
	}
	_, mnt := lazyfs.MountTemp(t)
	if got := SharedFileSystem(mnt); got != "fuse" {
		t.Fatalf("a FUSE mount is %q, want \"fuse\"", got)
	}
}

// TestLogStoreTrimFilesOffTheLock: a trim removes and punches its files
// without the session's lock, so an append completes meanwhile (with -o
// discard an unlink or a punch can take the file system 100 ms and more).
// The hook appends at that point and waits for the append: were the lock
// held, the append could not be admitted and the test would time out.
func TestLogStoreTrimFilesOffTheLock(t *testing.T) {
	ctx := context.Background()
	st := ownLogStream(t, LogOptions{SegmentBytes: 64 << 10, PreallocBytes: 16 << 10, IndexBytes: 8 << 10})
	var last stream.AppendResult
	for range 40 {
		last = appendOne(t, st, strings.Repeat("z", 4<<10))
	}
	during := make(chan error, 1)
	trimFilesHook = func() {
		trimFilesHook = nil
		done := make(chan error, 1)
		go func() {
			_, err := st.Append(ctx, stream.Batch{Count: 1, Payload: []byte("during the trim")}).Result()
			done <- err
		}()
		select {
		case err := <-done:
			during <- err
		case <-time.After(30 * time.Second):
			during <- errors.New("not completed within 30 s: the trim holds the session's lock")
		}
	}
	defer func() { trimFilesHook = nil }()
	if err := st.Trim(ctx, last.BaseOffset); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-during:
		if err != nil {
			t.Fatalf("an append made while the trim removed its files: %v", err)
		}
	default:
		t.Fatal("the trim did not reach its files")
	}
	bs, err := st.Fetch(ctx, last.NextOffset, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || string(bs[0].Payload) != "during the trim" {
		t.Fatalf("fetch after the trim: %d batches, %v", len(bs), err)
	}
}

// TestLogStoreCallerReusesBuffers: the Stream contract's buffer ownership.
// A LogStore holds an append's payload (it copies it only when its writer
// runs) until the append completes; once it has, the caller may reuse the
// buffer, and what was stored does not change. Small appends go through
// the page cache, large ones (DirectMinBytes and more) with O_DIRECT.
func TestLogStoreCallerReusesBuffers(t *testing.T) {
	ctx := context.Background()
	st := ownLogStream(t, LogOptions{})
	var want [][]byte
	for i, size := range []int{100, 3000, DirectMinBytes, 2 * DirectMinBytes, 7} {
		buf := bytes.Repeat([]byte{byte('a' + i)}, size)
		want = append(want, bytes.Clone(buf))
		if _, err := st.Append(ctx, stream.Batch{Count: 1, Payload: buf}).Result(); err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] = 'X' // the caller reuses its buffer
		}
	}
	bs, err := st.Fetch(ctx, 0, stream.NoEnd, 64<<20)
	if err != nil || len(bs) != len(want) {
		t.Fatalf("fetch: %d batches, %v", len(bs), err)
	}
	for i, b := range bs {
		if !bytes.Equal(b.Payload, want[i]) {
			t.Fatalf("batch %d (%d bytes) changed after its caller reused the buffer", i, len(want[i]))
		}
	}
}

// ownLogStream opens stream "p" read-write at epoch 1 on a new LogStore,
// closed when the test ends.
func ownLogStream(t *testing.T, opts LogOptions) *stream.Stream {
	t.Helper()
	s, err := OpenLogStore(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	st, err := s.Open(context.Background(), "p", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLogStoreReadRacesSpareReuse: a reader that opened a segment just
// before a trim freed it, and before the writer took it back as a spare
// and wrote new frames over it, reads the offset gone
// (ErrOffsetOutOfRange), never the frames now in the file. The bytes it
// meets belong to higher offsets of the same stream.
func TestLogStoreReadRacesSpareReuse(t *testing.T) {
	ctx := context.Background()
	s, st, dir := smallSegments(t, 8, "u")
	payload := func(i int) string { return fmt.Sprintf("%04d-%s", i, strings.Repeat("u", 200)) }
	for i := range 40 {
		appendOne(t, st, payload(i))
	}
	ro, err := s.Open(ctx, "u", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before := spareFiles(t, dir)
	raced := false
	readOpened = func() {
		if raced {
			return
		}
		raced = true
		if err := st.Trim(ctx, 30); err != nil {
			t.Errorf("trim: %v", err)
		}
		if len(spareFiles(t, dir)) == len(before) {
			t.Errorf("the trim kept no spare (spares %v)", spareFiles(t, dir))
		}
		for i := 40; i < 120; i++ {
			appendOne(t, st, payload(i))
		}
		if n := len(spareFiles(t, dir)); n != len(before) {
			t.Errorf("%d spares after the appends; want the trim's taken back (%d before it)", n, len(before))
		}
	}
	t.Cleanup(func() { readOpened = nil })
	// Up to offset 5: within the segment the read opened (a read on past
	// it would find the next segment gone, and fail for that).
	bs, err := ro.Fetch(ctx, 0, 5, 0)
	if !raced {
		t.Fatal("the read opened no segment")
	}
	if !errors.Is(err, stream.ErrOffsetOutOfRange) {
		var got []string
		for _, b := range bs {
			got = append(got, string(b.Payload[:4]))
		}
		t.Fatalf("read racing a trim and the reuse of its segment: %v, batches %v; want ErrOffsetOutOfRange", err, got)
	}
	t.Logf("read at 0: %v", err)
	readOpened = nil
	bs, err = ro.Fetch(ctx, 30, stream.NoEnd, 0)
	if err != nil || len(bs) == 0 || string(bs[0].Payload) != payload(30) {
		t.Fatalf("fetch from the trim point after the race: %d batches, %v", len(bs), err)
	}
}

// TestLogStoreTrustedChecksum: a supplied payload checksum is checked
// against the bytes (a wrong one is ErrCorrupt) unless the append's context
// carries internal/trusted's mark, as the write-ahead layer's do; then the
// store takes it as the frame's without a pass over the bytes. So a wrong
// trusted one is accepted, and its batch then reads as ErrCorrupt, never
// as other bytes: the mark is for callers that took the checksum from the
// bytes themselves.
func TestLogStoreTrustedChecksum(t *testing.T) {
	ctx := context.Background()
	marked := trusted.WithChecksum(ctx)
	st := ownLogStream(t, LogOptions{})
	p := bytes.Repeat([]byte("trusted "), 1000)
	right := stream.Batch{Count: 1, Payload: p, PayloadChecksum: stream.Checksum(p), PayloadChecksumSet: true}
	wrong := right
	wrong.PayloadChecksum ^= 1
	if _, err := st.Append(ctx, wrong).Result(); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("append with a wrong supplied checksum, unmarked: %v; want ErrCorrupt", err)
	}
	if _, err := st.Append(marked, right).Result(); err != nil {
		t.Fatalf("append with a right supplied checksum, marked: %v", err)
	}
	if bs, err := st.Fetch(ctx, 0, 1, 0); err != nil || len(bs) != 1 || !bytes.Equal(bs[0].Payload, p) {
		t.Fatalf("fetch of the marked batch: %d batches, %v", len(bs), err)
	}
	if _, err := st.Append(marked, wrong).Result(); err != nil {
		t.Fatalf("append with a wrong supplied checksum, marked: %v; want it taken unread", err)
	}
	if bs, err := st.Fetch(ctx, 1, 2, 0); !errors.Is(err, stream.ErrCorrupt) {
		t.Fatalf("fetch of the batch whose trusted checksum was wrong: %d batches, %v; want ErrCorrupt", len(bs), err)
	}
}
