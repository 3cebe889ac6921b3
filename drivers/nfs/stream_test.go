package nfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream"
)

// openStore opens the driver's Store on root and closes it when t ends.
func openStore(t *testing.T, root string, extra ...string) *stream.Store {
	t.Helper()
	s, err := Open(t.Context(), configFor(root, extra...))
	if err != nil {
		t.Fatalf("nfs.Open on %s: %v", root, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendAll appends bs in order and returns their base offsets.
func appendAll(t *testing.T, st *stream.Stream, bs []stream.Batch) []int64 {
	t.Helper()
	var bases []int64
	for i, b := range bs {
		r, err := stream.Append(t.Context(), st, b)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		bases = append(bases, r.BaseOffset)
	}
	return bases
}

func testBatch(i, size int) stream.Batch {
	p := bytes.Repeat([]byte{byte('a' + i%26)}, size)
	return stream.Batch{Count: 1, Timestamp: int64(i), Payload: p}
}

// TestStreamNamesEscapingRootRefused: stream names that try to leave the
// root fail with ErrInvalidArgument in every Store and Stream entry point,
// and no file is touched.
func TestStreamNamesEscapingRootRefused(t *testing.T) {
	parent := freshRoot(t)
	root := filepath.Join(parent, "store")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, root)
	before := treeState(t, parent)
	ctx := t.Context()
	for _, name := range []string{
		"../x", "../../etc/passwd", "a/../../x", "/abs", "/etc/passwd", "a\x00b", "\x00",
		"a/./b", "./a", "..", ".", "a//b", "a/", "", strings.Repeat("n", stream.MaxNameLen+1),
	} {
		errs := map[string]error{
			"Create": s.Create(ctx, name),
			"Delete": s.Delete(ctx, name),
		}
		_, errs["Open"] = s.Open(ctx, name, stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
		_, errs["Open read-only"] = s.Open(ctx, name, stream.OpenOptions{Mode: stream.ModeReadOnly})
		for op, err := range errs {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Errorf("%s(%q): got %v, want ErrInvalidArgument", op, name, err)
			}
		}
	}
	if after := treeState(t, parent); !slices.Equal(before, after) {
		t.Fatalf("bad stream names touched files:\nbefore %q\nafter  %q", before, after)
	}
}

// chunkFiles lists the chunk files of the store at root.
func chunkFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(root, objectsDir), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == "c"+dirSuffix {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// TestFlippedByteIsCorrupt: a chunk file with one flipped byte, anywhere in
// a batch's bytes, gives ErrCorrupt on fetch (from a fresh Store, so no
// cache hides it), never wrong data.
func TestFlippedByteIsCorrupt(t *testing.T) {
	root := freshRoot(t)
	s := openStore(t, root)
	st, err := s.Open(t.Context(), "corrupt/s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	want := testBatch(0, 5000)
	appendAll(t, st, []stream.Batch{want})
	st.Close()
	var chunk string
	for _, f := range chunkFiles(t, root) {
		if fi, err := os.Stat(f); err == nil && fi.Size() >= 5000 {
			chunk = f
		}
	}
	if chunk == "" {
		t.Fatalf("no chunk file of >= 5000 bytes under %s: %q", root, chunkFiles(t, root))
	}
	orig, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	for _, pos := range []int{len(orig) - 1, len(orig) - 2500, len(orig) - 4999} {
		flipped := slices.Clone(orig)
		flipped[pos] ^= 0x40
		if err := os.WriteFile(chunk, flipped, 0o644); err != nil {
			t.Fatal(err)
		}
		fresh := openStore(t, root)
		r, err := fresh.Open(t.Context(), "corrupt/s", stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err == nil {
			var bs []stream.Batch
			bs, err = r.Fetch(t.Context(), 0, stream.NoEnd, 0)
			r.Close()
			if err == nil {
				t.Fatalf("byte %d of %d flipped in %s: fetch returned %d batches and no error", pos, len(orig), chunk, len(bs))
			}
		}
		if !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("byte %d of %d flipped: got %v, want ErrCorrupt", pos, len(orig), err)
		}
	}
	if err := os.WriteFile(chunk, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := openStore(t, root).Open(t.Context(), "corrupt/s", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := r.Fetch(t.Context(), 0, stream.NoEnd, 0)
	if err != nil || len(bs) != 1 || !bytes.Equal(bs[0].Payload, want.Payload) {
		t.Fatalf("restored chunk: %d batches, %v", len(bs), err)
	}
}

// TestFullDiskStream: appends on a full disk fail with ErrUnavailable;
// every batch acked before stays readable with its bytes, in this session
// and in a new owner's.
func TestFullDiskStream(t *testing.T) {
	root := mountTmpfs(t, "2m")
	s := openStore(t, root)
	st, err := s.Open(t.Context(), "full/s", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	var acked []stream.Batch
	var full error
	for i := 0; i < 200; i++ {
		b := testBatch(i, 50_000)
		r, err := stream.Append(t.Context(), st, b)
		if err != nil {
			full = err
			break
		}
		b.BaseOffset = r.BaseOffset
		acked = append(acked, b)
	}
	if !errors.Is(full, stream.ErrUnavailable) {
		t.Fatalf("append on a full disk: got %v, want ErrUnavailable", full)
	}
	if len(acked) == 0 {
		t.Fatal("no append fitted on the 2 MiB tmpfs")
	}
	t.Logf("%d appends acked; then: %v", len(acked), full)
	check := func(who string, st *stream.Stream) {
		t.Helper()
		log, err := readLog(t, st)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		for _, a := range acked {
			i := slices.IndexFunc(log, func(b stream.Batch) bool { return b.BaseOffset == a.BaseOffset })
			if i < 0 || !bytes.Equal(log[i].Payload, a.Payload) {
				t.Fatalf("%s: acked batch at %d missing or changed on the full disk", who, a.BaseOffset)
			}
		}
	}
	check("the writer's session", st)
	ro, err := openStore(t, root).Open(t.Context(), "full/s", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatalf("read-only open on the full disk: %v", err)
	}
	check("a read-only session", ro)
}
