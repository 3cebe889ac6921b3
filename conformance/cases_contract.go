package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stratastream/strata/stream"
)

var _ = register(FamilyContract,
	Case{Name: "empty-stream", Doc: "a new stream has offsets [0,0), Fetch(0) is empty and Fetch(1) out of range", run: caseEmptyStream},
	Case{Name: "create-exists-missing", Doc: "Create twice is ErrAlreadyExists; Open or Delete of a missing stream is ErrNotFound", run: caseCreateExistsMissing},
	Case{Name: "session-identity", Doc: "a session reports its name and epoch", run: caseSessionIdentity},
	Case{Name: "append-offsets", Doc: "appends get contiguous base offsets by Count; results and NextOffset agree", run: caseAppendOffsets},
	Case{Name: "fetch-roundtrip", Doc: "fetch returns every batch with the same count, timestamp, properties and bytes", run: caseFetchRoundtrip},
	Case{Name: "empty-payload", Doc: "a batch with an empty payload and no properties round-trips", run: caseEmptyPayload},
	Case{Name: "fetch-at-end", Doc: "Fetch at NextOffset is empty; one past it is ErrOffsetOutOfRange", run: caseFetchAtEnd},
	Case{Name: "fetch-mid-batch", Doc: "a fetch starting inside a batch returns that whole batch first", run: caseFetchMidBatch},
	Case{Name: "fetch-end-bound", Doc: "Fetch(start, end) returns exactly the batches overlapping [start, end); end is clamped", run: caseFetchEndBound},
	Case{Name: "fetch-maxbytes-small", Doc: "maxBytes smaller than one batch still returns exactly that one batch", run: caseFetchMaxBytesSmall},
	Case{Name: "fetch-paging", Doc: "paging with a small maxBytes returns every batch once, never more than about maxBytes a page", Randomised: true, run: caseFetchPaging},
	Case{Name: "trim-mid", Doc: "trim moves StartOffset; below it is out of range; the batch holding it is still served", run: caseTrimMid},
	Case{Name: "trim-to-end", Doc: "trim to NextOffset empties the readable range and appends go on at NextOffset", run: caseTrimToEnd},
	Case{Name: "trim-backwards-noop", Doc: "a trim below the start offset is a no-op, not an error", run: caseTrimBackwards},
	Case{Name: "reopen-keeps-log", Doc: "close and reopen (same and higher epoch) keeps offsets, data and the trimmed start", run: caseReopenKeepsLog},
	Case{Name: "close-waits-inflight", Doc: "Close waits for in-flight appends: every one is acked and readable after reopen", run: caseCloseWaits},
	Case{Name: "delete-recreate", Doc: "a deleted then recreated stream starts at 0 and shows no old data", run: caseDeleteRecreate},
	Case{Name: "delete-fences-session", Doc: "Delete fences open sessions: their appends and trims fail ErrFenced", run: caseDeleteFences},
	Case{Name: "list", Doc: "List returns the streams under a prefix, sorted, without deleted ones", run: caseList},
	Case{Name: "supplied-checksum", Doc: "a batch with a right caller-supplied payload checksum round-trips; with a wrong one it is never returned (Append or Fetch fails ErrCorrupt)", run: caseSuppliedChecksum},
	Case{Name: "names-valid", Doc: "names using every allowed byte, nesting, and 255 bytes work for create, open, append, list", run: caseNamesValid},
)

func caseEmptyStream(e *env) {
	s := e.store()
	name := e.name("s")
	if err := s.Create(e.ctx, name); err != nil {
		e.t.Fatalf("create %q: %v", name, err)
	}
	st := e.open(s, name, 1)
	e.wantOffsets("new stream", st, 0, 0)
	bs, err := st.Fetch(e.ctx, 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 0 {
		e.t.Fatalf("Fetch(0) on an empty stream: %d batches, err %v; want none, nil", len(bs), err)
	}
	_, err = st.Fetch(e.ctx, 1, stream.NoEnd, 0)
	e.wantErr("Fetch(1) on an empty stream", err, stream.ErrOffsetOutOfRange)
	e.wantErr("Trim(1) on an empty stream", st.Trim(e.ctx, 1), stream.ErrOffsetOutOfRange)
	if err := st.Trim(e.ctx, 0); err != nil {
		e.t.Fatalf("Trim(0) on an empty stream: %v", err)
	}
	e.wantOffsets("after Trim(0)", st, 0, 0)
}

func caseCreateExistsMissing(e *env) {
	s := e.store()
	name := e.name("s")
	if err := s.Create(e.ctx, name); err != nil {
		e.t.Fatalf("create %q: %v", name, err)
	}
	e.wantErr("second Create", s.Create(e.ctx, name), stream.ErrAlreadyExists)
	missing := e.name("missing")
	_, err := s.Open(e.ctx, missing, stream.OpenOptions{Epoch: 1})
	e.wantErr("Open of a missing stream without CreateIfMissing", err, stream.ErrNotFound)
	_, err = s.Open(e.ctx, missing, stream.OpenOptions{Mode: stream.ModeReadOnly})
	e.wantErr("read-only Open of a missing stream", err, stream.ErrNotFound)
	e.wantErr("Delete of a missing stream", s.Delete(e.ctx, missing), stream.ErrNotFound)
	names, err := s.List(e.ctx, e.prefix+"/")
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	if !slices.Equal(names, []string{name}) {
		e.t.Fatalf("List after failed opens: %q, want only %q (a failed Open must not create)", names, name)
	}
	st := e.open(s, name, 1)
	e.wantOffsets("open of the created stream", st, 0, 0)
}

func caseSessionIdentity(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 7)
	if st.Name() != name || st.Epoch() != 7 {
		e.t.Fatalf("session reports name %q epoch %d, want %q epoch 7", st.Name(), st.Epoch(), name)
	}
}

func caseAppendOffsets(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	next := int64(0)
	for i, count := range []uint32{1, 5, 1, 100, 2, 1 << 20, 3} {
		b := stream.Batch{Count: count, Timestamp: int64(i), Payload: payload("off", i, 32)}
		a := e.appendOK(st, b)
		if a.Base != next {
			e.t.Fatalf("append %d (count %d): base offset %d, want %d", i, count, a.Base, next)
		}
		next += int64(count)
		if st.NextOffset() != next {
			e.t.Fatalf("after append %d: NextOffset %d, want %d", i, st.NextOffset(), next)
		}
	}
}

func caseFetchRoundtrip(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	var acks []acked
	for i := range 12 {
		acks = append(acks, e.appendOK(st, batch("rt", i, 10+i*97)))
	}
	log := e.readAll(st)
	if len(log) != len(acks) {
		e.t.Fatalf("read %d batches, appended %d", len(log), len(acks))
	}
	for i, b := range log {
		if b.BaseOffset != acks[i].Base {
			e.t.Fatalf("batch %d at offset %d, acked at %d", i, b.BaseOffset, acks[i].Base)
		}
	}
	e.checkHolds("read back", log, acks)
	// A second read must give the same bytes (no state consumed by reading).
	e.checkHolds("second read", e.readAll(st), acks)
}

func caseEmptyPayload(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	a := e.appendOK(st, stream.Batch{Count: 4, Timestamp: 42})
	b := e.appendOK(st, stream.Batch{Count: 1, Timestamp: 43, Payload: []byte{}})
	e.checkHolds("read back", e.readAll(st), []acked{a, b})
	if st.NextOffset() != 5 {
		e.t.Fatalf("NextOffset %d, want 5", st.NextOffset())
	}
}

func caseFetchAtEnd(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	e.appendMany(st, "end", 5, 50)
	next := st.NextOffset()
	bs, err := st.Fetch(e.ctx, next, stream.NoEnd, 0)
	if err != nil || len(bs) != 0 {
		e.t.Fatalf("Fetch(NextOffset=%d): %d batches, err %v; want none, nil", next, len(bs), err)
	}
	_, err = st.Fetch(e.ctx, next+1, stream.NoEnd, 0)
	e.wantErr("Fetch(NextOffset+1)", err, stream.ErrOffsetOutOfRange)
	_, err = st.Fetch(e.ctx, next+1_000_000, stream.NoEnd, 0)
	e.wantErr("Fetch(NextOffset+1e6)", err, stream.ErrOffsetOutOfRange)
}

func caseFetchMidBatch(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	a := e.appendOK(st, stream.Batch{Count: 10, Payload: payload("mid", 0, 40)})
	b := e.appendOK(st, stream.Batch{Count: 10, Payload: payload("mid", 1, 40)})
	for _, start := range []int64{3, 9} {
		bs, err := st.Fetch(e.ctx, start, stream.NoEnd, 0)
		if err != nil || len(bs) == 0 || bs[0].BaseOffset != 0 {
			e.t.Fatalf("Fetch(%d) inside [0,10): %d batches, err %v; want the batch at 0 first", start, len(bs), err)
		}
		e.checkHolds("fetch mid-batch", bs, []acked{a})
	}
	bs, err := st.Fetch(e.ctx, 15, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || bs[0].BaseOffset != 10 {
		e.t.Fatalf("Fetch(15) inside [10,20): %d batches, err %v; want exactly the batch at 10", len(bs), err)
	}
	e.checkHolds("fetch mid-batch", bs, []acked{b})
}

func caseFetchEndBound(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	// Five batches of Count 10: [0,10) [10,20) ... [40,50).
	for i := range 5 {
		e.appendOK(st, stream.Batch{Count: 10, Payload: payload("bound", i, 20)})
	}
	for _, tc := range []struct {
		start, end int64
		want       []int64
	}{
		{0, 10, []int64{0}},
		{0, 11, []int64{0, 10}},
		{5, 25, []int64{0, 10, 20}},
		{10, 20, []int64{10}},
		{45, 1000, []int64{40}},
		{0, stream.NoEnd, []int64{0, 10, 20, 30, 40}},
	} {
		bs, err := st.Fetch(e.ctx, tc.start, tc.end, 0)
		if err != nil {
			e.t.Fatalf("Fetch(%d, %d): %v", tc.start, tc.end, err)
		}
		var got []int64
		for _, b := range bs {
			got = append(got, b.BaseOffset)
		}
		if !slices.Equal(got, tc.want) {
			e.t.Fatalf("Fetch(%d, %d): batches at %v, want %v", tc.start, tc.end, got, tc.want)
		}
	}
}

func caseFetchMaxBytesSmall(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	acks := e.appendMany(st, "small", 4, 1000)
	for _, max := range []int{1, 999} {
		bs, err := st.Fetch(e.ctx, 0, stream.NoEnd, max)
		if err != nil {
			e.t.Fatalf("Fetch(0, maxBytes=%d): %v", max, err)
		}
		if len(bs) != 1 {
			e.t.Fatalf("Fetch(0, maxBytes=%d) below one batch's size (%d): %d batches, want exactly 1", max, acks[0].Batch.Size(), len(bs))
		}
		e.checkHolds("fetch with small maxBytes", bs, acks[:1])
	}
}

func caseFetchPaging(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	var acks []acked
	for i := range 60 {
		acks = append(acks, e.appendOK(st, batch("page", i, 1+e.rng.IntN(3000))))
	}
	maxBytes := 500 + e.rng.IntN(4000)
	var log []stream.Batch
	next := int64(0)
	for next < st.NextOffset() {
		bs, err := st.Fetch(e.ctx, next, stream.NoEnd, maxBytes)
		if err != nil {
			e.t.Fatalf("Fetch(%d, maxBytes=%d): %v", next, maxBytes, err)
		}
		if len(bs) == 0 {
			e.t.Fatalf("Fetch(%d, maxBytes=%d) below NextOffset %d returned nothing", next, maxBytes, st.NextOffset())
		}
		// Only the last batch of a page may take it past maxBytes.
		total := 0
		for _, b := range bs[:len(bs)-1] {
			total += b.Size()
		}
		if total > maxBytes {
			e.t.Fatalf("Fetch(%d, maxBytes=%d): the batches before the last already hold %d bytes (at most one batch may go past maxBytes)", next, maxBytes, total)
		}
		log = append(log, bs...)
		next = bs[len(bs)-1].EndOffset()
	}
	if err := contiguous(log); err != nil {
		e.t.Fatalf("paged read: %v", err)
	}
	if len(log) != len(acks) {
		e.t.Fatalf("paged read: %d batches, appended %d", len(log), len(acks))
	}
	e.checkHolds("paged read", log, acks)
}

func caseTrimMid(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	// Batches of Count 10 at 0, 10, 20, 30.
	var acks []acked
	for i := range 4 {
		acks = append(acks, e.appendOK(st, stream.Batch{Count: 10, Payload: payload("trim", i, 64)}))
	}
	if err := st.Trim(e.ctx, 15); err != nil {
		e.t.Fatalf("Trim(15): %v", err)
	}
	e.wantOffsets("after Trim(15)", st, 15, 40)
	for _, off := range []int64{0, 14} {
		_, err := st.Fetch(e.ctx, off, stream.NoEnd, 0)
		e.wantErr("Fetch below the trimmed start", err, stream.ErrOffsetOutOfRange)
	}
	bs, err := st.Fetch(e.ctx, 15, stream.NoEnd, 0)
	if err != nil || len(bs) == 0 || bs[0].BaseOffset != 10 {
		e.t.Fatalf("Fetch(15) after Trim(15): %d batches, err %v; want the batch [10,20) first", len(bs), err)
	}
	e.checkHolds("read after trim", bs, acks[1:])
	a := e.appendOK(st, stream.Batch{Count: 1, Payload: payload("trim", 9, 8)})
	if a.Base != 40 {
		e.t.Fatalf("append after trim at %d, want 40", a.Base)
	}
}

func caseTrimToEnd(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	e.appendMany(st, "tte", 6, 100)
	end := st.NextOffset()
	if err := st.Trim(e.ctx, end); err != nil {
		e.t.Fatalf("Trim(NextOffset=%d): %v", end, err)
	}
	e.wantOffsets("after trim to end", st, end, end)
	bs, err := st.Fetch(e.ctx, end, stream.NoEnd, 0)
	if err != nil || len(bs) != 0 {
		e.t.Fatalf("Fetch(%d) after trim to end: %d batches, err %v; want none", end, len(bs), err)
	}
	_, err = st.Fetch(e.ctx, end-1, stream.NoEnd, 0)
	e.wantErr("Fetch below a trim to the end", err, stream.ErrOffsetOutOfRange)
	a := e.appendOK(st, batch("tte", 99, 10))
	if a.Base != end {
		e.t.Fatalf("append after trim to end got %d, want %d", a.Base, end)
	}
	e.checkHolds("read after trim to end", e.readAll(st), []acked{a})
}

func caseTrimBackwards(e *env) {
	s := e.store()
	st := e.open(s, e.name("s"), 1)
	e.appendMany(st, "tb", 10, 20)
	next := st.NextOffset()
	if err := st.Trim(e.ctx, 8); err != nil {
		e.t.Fatalf("Trim(8): %v", err)
	}
	for _, off := range []int64{8, 3, 0, -1} {
		if err := st.Trim(e.ctx, off); err != nil {
			e.t.Fatalf("Trim(%d) at or below start 8: %v, want a no-op", off, err)
		}
		e.wantOffsets("after a backwards trim", st, 8, next)
	}
}

func caseReopenKeepsLog(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	acks := e.appendMany(st, "reopen", 20, 200)
	if err := st.Trim(e.ctx, 5); err != nil {
		e.t.Fatalf("Trim(5): %v", err)
	}
	next := st.NextOffset()
	if err := st.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	for _, epoch := range []uint64{1, 2} {
		st2 := e.open(s, name, epoch)
		e.wantOffsets("reopen", st2, 5, next)
		e.checkHolds("read after reopen", e.readAll(st2), acks[2:])
		if err := st2.Close(); err != nil {
			e.t.Fatalf("close: %v", err)
		}
	}
}

func caseCloseWaits(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	const n = 100
	futs := make([]*stream.AppendFuture, n)
	bs := make([]stream.Batch, n)
	for i := range n {
		bs[i] = batch("cw", i, 300)
		futs[i] = st.Append(e.ctx, bs[i])
	}
	if err := st.Close(); err != nil {
		e.t.Fatalf("close with appends in flight: %v", err)
	}
	var acks []acked
	for i, f := range futs {
		select {
		case <-f.Done():
		default:
			e.t.Fatalf("append %d still pending after Close returned (Close must wait for in-flight appends)", i)
		}
		r, err := f.Result()
		if err != nil {
			e.t.Fatalf("append %d in flight at Close: %v (Close must wait, not fail them)", i, err)
		}
		acks = append(acks, acked{Base: r.BaseOffset, Batch: bs[i]})
	}
	_, err := st.Fetch(e.ctx, 0, stream.NoEnd, 0)
	e.wantErr("Fetch after Close", err, stream.ErrClosed)
	st2 := e.open(s, name, 2)
	e.checkHolds("read after close and reopen", e.readAll(st2), acks)
}

func caseDeleteRecreate(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 3)
	e.appendMany(st, "old", 10, 100)
	if err := st.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	if err := s.Delete(e.ctx, name); err != nil {
		e.t.Fatalf("delete %q: %v", name, err)
	}
	_, err := s.Open(e.ctx, name, stream.OpenOptions{Epoch: 3})
	e.wantErr("Open after Delete", err, stream.ErrNotFound)
	if err := s.Create(e.ctx, name); err != nil {
		e.t.Fatalf("recreate %q: %v", name, err)
	}
	st2 := e.open(s, name, 1) // a new incarnation starts over: a low epoch is fine
	e.wantOffsets("recreated stream", st2, 0, 0)
	bs, err := st2.Fetch(e.ctx, 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 0 {
		e.t.Fatalf("Fetch(0) on the recreated stream: %d batches, err %v; want none (no old data)", len(bs), err)
	}
	a := e.appendOK(st2, batch("new", 0, 50))
	log := e.readAll(st2)
	if len(log) != 1 {
		e.t.Fatalf("recreated stream holds %d batches, want 1", len(log))
	}
	e.checkHolds("recreated stream", log, []acked{a})
}

func caseDeleteFences(e *env) {
	s := e.store()
	name := e.name("s")
	st := e.open(s, name, 1)
	e.appendMany(st, "df", 3, 10)
	if err := s.Delete(e.ctx, name); err != nil {
		e.t.Fatalf("delete %q: %v", name, err)
	}
	_, err := stream.Append(e.ctx, st, batch("df", 9, 10))
	e.wantErr("append by a session of a deleted stream", err, stream.ErrFenced)
	e.wantErr("trim by a session of a deleted stream", st.Trim(e.ctx, 1), stream.ErrFenced)
	// A recreate must not be written to by the old session either.
	if err := s.Create(e.ctx, name); err != nil {
		e.t.Fatalf("recreate: %v", err)
	}
	_, err = stream.Append(e.ctx, st, batch("df", 10, 10))
	e.wantErr("append by an old session after recreate", err, stream.ErrFenced)
	st2 := e.open(s, name, 1)
	e.wantOffsets("recreated stream", st2, 0, 0)
}

func caseList(e *env) {
	s := e.store()
	base := e.prefix + "/l"
	want := []string{base + "/a", base + "/a/x", base + "/b", base + "/b.c", base + "/z-1"}
	for _, n := range []string{base + "/z-1", base + "/a/x", base + "/b", base + "/a", base + "/b.c"} {
		if err := s.Create(e.ctx, n); err != nil {
			e.t.Fatalf("create %q: %v", n, err)
		}
	}
	list := func(prefix string) []string {
		names, err := s.List(e.ctx, prefix)
		if err != nil {
			e.t.Fatalf("List(%q): %v", prefix, err)
		}
		return names
	}
	if got := list(base + "/"); !slices.Equal(got, want) {
		e.t.Fatalf("List(%q) = %q, want %q", base+"/", got, want)
	}
	if got := list(base + "/a"); !slices.Equal(got, want[:2]) {
		e.t.Fatalf("List(%q) = %q, want %q", base+"/a", got, want[:2])
	}
	if got := list(base + "/b"); !slices.Equal(got, want[2:4]) {
		e.t.Fatalf("List(%q) = %q, want %q", base+"/b", got, want[2:4])
	}
	if got := list(base + "/nothing"); len(got) != 0 {
		e.t.Fatalf("List of an unused prefix = %q, want none", got)
	}
	if err := s.Delete(e.ctx, base+"/b"); err != nil {
		e.t.Fatalf("delete: %v", err)
	}
	wantAfter := slices.Delete(slices.Clone(want), 2, 3)
	if got := list(base + "/"); !slices.Equal(got, wantAfter) {
		e.t.Fatalf("List after delete = %q, want %q", got, wantAfter)
	}
	// The whole-namespace listing holds ours too, sorted.
	all := list("")
	if !slices.IsSorted(all) {
		e.t.Fatalf("List(\"\") is not sorted")
	}
	for _, n := range wantAfter {
		if !slices.Contains(all, n) {
			e.t.Fatalf("List(\"\") lacks %q", n)
		}
	}
}

func caseNamesValid(e *env) {
	s := e.store()
	long := e.prefix + "/"
	long += strings.Repeat("n", stream.MaxNameLen-len(long))
	names := []string{
		e.prefix + "/ABCxyz019._-",
		e.prefix + "/deep/er/and/deeper/still",
		e.prefix + "/.hidden/..x/x..",
		e.prefix + "/-/_/x",
		long,
	}
	for i, n := range names {
		if err := stream.ValidateName(n); err != nil {
			e.t.Fatalf("test bug: %q is not a valid name: %v", n, err)
		}
		st := e.open(s, n, 1)
		a := e.appendOK(st, batch("name", i, 16))
		e.checkHolds("read "+n, e.readAll(st), []acked{a})
	}
	got, err := s.List(e.ctx, e.prefix+"/")
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	want := slices.Clone(names)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Fatalf("List = %q, want %q", got, want)
	}
	if len(long) != stream.MaxNameLen {
		e.t.Fatalf("test bug: long name is %d bytes", len(long))
	}
	if !errors.Is(stream.ValidateName(long+"n"), stream.ErrInvalidArgument) {
		e.t.Fatalf("test bug: %d-byte name accepted by ValidateName", len(long)+1)
	}
}

// suppliedSizes are the payload sizes of the supplied-checksum case: empty,
// small, and past the sizes from which engines combine checksums rather
// than recompute them (stream/chunked: 8 KiB).
var suppliedSizes = []int{0, 1, 100, 4 << 10, 64<<10 + 7}

func caseSuppliedChecksum(e *env) {
	s := e.store()
	sizes := slices.DeleteFunc(slices.Clone(suppliedSizes), func(n int) bool {
		return e.info.MaxBatchBytes > 0 && n+64 > e.info.MaxBatchBytes
	})
	var s2 *stream.Store
	if e.h.Second != nil {
		s2 = e.second(s)
	}
	// Right checksums: the batches round-trip, and Fetch returns them with
	// the checksum fields unset (they are an input to Append only).
	name := e.name("right")
	st := e.open(s, name, 1)
	var acks []acked
	for i, size := range sizes {
		b := batch("sum", i, size)
		b.Payload = b.Payload[:size]
		b.PayloadChecksum, b.PayloadChecksumSet = stream.Checksum(b.Payload), true
		acks = append(acks, e.appendOK(st, b))
	}
	log := e.readAll(st)
	e.checkHolds("batches appended with their payload checksum", log, acks)
	for _, b := range log {
		if b.PayloadChecksumSet || b.PayloadChecksum != 0 {
			e.t.Fatalf("Fetch returned the batch at %d with PayloadChecksum %08x set %v; Fetch leaves them unset", b.BaseOffset, b.PayloadChecksum, b.PayloadChecksumSet)
		}
	}
	if s2 != nil {
		e.checkHolds("batches appended with their payload checksum, read by a second store", e.readAll(e.openRO(s2, name)), acks)
	}
	// Wrong checksums, one stream each: the payload is never returned.
	for i, size := range sizes[1:] {
		name := e.name(fmt.Sprintf("wrong-%d", size))
		st := e.open(s, name, 1)
		b := batch("wrong", i, size)
		b.Payload = b.Payload[:size]
		b.PayloadChecksum, b.PayloadChecksumSet = stream.Checksum(b.Payload)^0x00400000, true
		what := fmt.Sprintf("%d-byte batch with a wrong supplied checksum", len(b.Payload))
		r, err := stream.Append(e.ctx, st, b)
		if err != nil {
			e.wantErr("append of a "+what, err, stream.ErrCorrupt)
			e.t.Logf("%s: append refused: %v", what, err)
			if st.NextOffset() != 0 {
				e.t.Fatalf("append of a %s failed, yet NextOffset is %d (want 0: nothing stored)", what, st.NextOffset())
			}
			if bs, err := st.Fetch(e.ctx, 0, stream.NoEnd, 0); err != nil || len(bs) != 0 {
				e.t.Fatalf("append of a %s failed, yet Fetch(0) gives %d batches, %v; want none", what, len(bs), err)
			}
			continue
		}
		check := func(reader string, st *stream.Stream) {
			bs, err := st.Fetch(e.ctx, r.BaseOffset, r.NextOffset, 0)
			for _, got := range bs {
				if got.BaseOffset == r.BaseOffset {
					e.t.Fatalf("Fetch by %s returned the %s (acked at %d) as good data (err %v); want ErrCorrupt", reader, what, r.BaseOffset, err)
				}
			}
			e.wantErr(fmt.Sprintf("Fetch by %s of the %s acked at %d", reader, what, r.BaseOffset), err, stream.ErrCorrupt)
		}
		e.t.Logf("%s: stored at %d; fetches must fail", what, r.BaseOffset)
		check("the writer", st)
		check("the writer again", st)
		if s2 != nil {
			check("a read-only session on a second store", e.openRO(s2, name))
		}
	}
}
