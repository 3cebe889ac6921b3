package wal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// TestRecordTag: a tagged record round-trips with its flag and names its
// incarnation's data stream; a record as earlier builds wrote it (no
// flags byte) decodes untagged, naming V+".d".
func TestRecordTag(t *testing.T) {
	rec := record{kind: kindClaim, inc: id{0xab, 1, 2, 3, 4, 5, 6, 7, 8}, claim: id{9}, wal: "_wal/x-1", from: 3, compacted: 2, start: 1, name: "a", tagged: true}
	got, err := decodeRecord(rec.encode())
	if err != nil || got != rec {
		t.Fatalf("tagged record: %+v, %v; want %+v", got, err, rec)
	}
	if d := got.dataName(); d != "a.ab01020304050607.d" || !isDataOf(d, "a") {
		t.Fatalf("tagged record's data stream %q", d)
	}
	legacy := rec
	legacy.tagged = false
	p := rec.encode()
	got, err = decodeRecord(p[:len(p)-1])
	if err != nil || got != legacy || got.dataName() != "a.d" {
		t.Fatalf("record without flags: %+v (data %q), %v; want %+v naming a.d", got, got.dataName(), err, legacy)
	}
}

func baseNames(t *testing.T, base stream.DriverStore) []string {
	t.Helper()
	names, err := base.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestRecreateOverLeftoverData: a Delete that stopped after the meta
// stream leaves the old incarnation's data stream. Two owners then
// create the stream again, the later one (epoch 2) opening, appending and
// compacting right after the earlier one's open of V.meta (before it
// reads V.meta, where an Open once removed a leftover V.data, and could
// remove the later owner's).
// No Open removes a data stream, and every incarnation has its own, so
// the later owner's acknowledged batch survives at offset 0, the old
// batch never shows, the earlier owner appends nothing, and the next
// Delete removes both data streams.
func TestRecreateOverLeftoverData(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Config{}).Driver()
	// The hook runs after a successful read-write open of a meta stream at
	// epoch 1 (the earlier owner's).
	hb := &openHook{DriverStore: mem, match: func(name string, o stream.OpenOptions, err error) bool {
		return err == nil && o.Mode == stream.ModeReadWrite && o.Epoch == 1 && strings.HasSuffix(name, metaSuffix)
	}}
	s, err := NewStore(stream.NewStore(keepBase{hb}), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, old, "old")
	if err := old.Close(); err != nil { // compacts "old" into V.data
		t.Fatal(err)
	}
	oldData := testDataName(t, s, "a")
	if err := mem.Delete(ctx, metaName("a")); err != nil { // a Delete that stopped halfway
		t.Fatal(err)
	}

	var later stream.AppendResult
	hb.arm(func() {
		w, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 2, CreateIfMissing: true})
		if err != nil {
			t.Error(err)
			return
		}
		later = mustAppend(t, w, "new")
		if err := w.Close(); err != nil { // compacts "new" into its V.data
			t.Error(err)
		}
	})
	if st, err := s.Open(ctx, "a", stream.OpenOptions{Epoch: 1, CreateIfMissing: true}); err == nil {
		// It read V.meta as it was before: its first append meets the
		// fence.
		if _, err := stream.Append(ctx, st, stream.Batch{Count: 1, Payload: []byte("earlier")}); !errors.Is(err, stream.ErrFenced) {
			t.Fatalf("the earlier owner's append: %v; want ErrFenced", err)
		}
		st.Close()
	} else if !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("the earlier owner's open: %v; want ErrFenced", err)
	}
	if !hb.fired() {
		t.Fatal("the race was not staged")
	}
	if later.BaseOffset != 0 {
		t.Fatalf("the later owner's append landed at %d; want 0 (a new stream)", later.BaseOffset)
	}
	newData := testDataName(t, s, "a")
	if newData == oldData {
		t.Fatalf("the new incarnation writes the old one's data stream %q", oldData)
	}
	ro, err := s.Open(ctx, "a", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := ro.Fetch(ctx, 0, stream.NoEnd, 0)
	ro.Close()
	if err != nil || len(bs) != 1 || string(bs[0].Payload) != "new" || bs[0].BaseOffset != 0 {
		t.Fatalf("after the race: %v, %v; want the later owner's batch alone at 0", bs, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, n := range baseNames(t, mem) {
		if strings.HasPrefix(n, "a.") {
			t.Fatalf("base stream %q after the Delete; want none of the stream's (the leftover removed too)", n)
		}
	}
}

// TestDeleteKeepsOtherStreams: Delete removes the data streams of its
// stream's incarnations and no other stream's, including one whose name
// is the stream's name, a dot and what looks like a tag.
func TestDeleteKeepsOtherStreams(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Config{}).Driver()
	s, err := NewStore(stream.NewStore(keepBase{mem}), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := strings.Repeat("l", stream.MaxNameLen-4)
	lookalike := "a.0123456789abcdef"
	for _, n := range []string{"a", "ab", "a.b", lookalike, long, long[:len(long)-1] + "m"} {
		st, err := s.Open(ctx, n, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, st, n)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The look-alike as an earlier build stored it: its data under the
	// legacy name, which has the shape of a tagged data name of "a".
	ld := legacyDataName(lookalike)
	if !isDataOf(ld, "a") {
		t.Fatalf("%q is not taken for a data stream of %q; the test needs it to be", ld, "a")
	}
	if err := mem.Delete(ctx, testDataName(t, s, lookalike)); err != nil {
		t.Fatal(err)
	}
	st, err := stream.NewStore(mem).Open(ctx, ld, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, n := range []string{"a", long} {
		before := baseNames(t, mem)
		if err := s.Delete(ctx, n); err != nil {
			t.Fatal(err)
		}
		after := baseNames(t, mem)
		if len(before)-len(after) != 2 {
			t.Fatalf("Delete(%q) removed %d base streams (%q left of %q); want its meta and data", n, len(before)-len(after), after, before)
		}
	}
	if !contains(baseNames(t, mem), ld) {
		t.Fatalf("Delete(%q) removed %q, the data of the stream %q", "a", ld, lookalike)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
