package chunked

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/stratastream/strata/stream"
)

// twoStreams returns a storage holding streams sx and sy, one record each
// ("x" and "y"), written through a Store that is closed again, and the
// newest manifests' layouts.
func twoStreams(t *testing.T) (*MemStorage, layout, layout) {
	t.Helper()
	ctx := context.Background()
	mem := NewMemStorage()
	// No checkpoints, not even at close: the next open walks every slot,
	// the fence chunk included.
	s := newTestStore(t, keepOpen{mem}, Options{Driver: "identity-test", CheckpointChunks: -1})
	for _, name := range []string{"sx", "sy"} {
		w := mustOpen(t, s, name, 1)
		if _, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte(strings.TrimPrefix(name, "s"))}); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
	}
	_ = s.Close()
	lx, _ := newestManifest(t, mem, "sx")
	ly, _ := newestManifest(t, mem, "sy")
	return mem, lx, ly
}

// copyObject overwrites key to (of the same storage) with the object at
// from, as a copy of one file over another would.
func copyObject(t *testing.T, mem *MemStorage, from, to string) {
	t.Helper()
	ctx := context.Background()
	b, err := mem.Get(ctx, from, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Put(ctx, to, b); err != nil {
		t.Fatal(err)
	}
}

// readX opens sx read-only and, with rw, read-write (a fresh Store: a
// restart) and fetches it; it returns the first error, or what the fetch
// returned.
func readX(t *testing.T, mem *MemStorage, rw bool) (string, error) {
	t.Helper()
	ctx := context.Background()
	s := newTestStore(t, keepOpen{mem}, Options{Driver: "identity-test"})
	var got string
	opens := []stream.OpenOptions{{Mode: stream.ModeReadOnly}}
	if rw {
		opens = append(opens, stream.OpenOptions{Epoch: 2})
	}
	for _, o := range opens {
		st, err := s.Open(ctx, "sx", o)
		if err != nil {
			return "", err
		}
		bs, err := st.Fetch(ctx, 0, stream.NoEnd, 0)
		_ = st.Close()
		if err != nil {
			return "", err
		}
		if len(bs) > 0 {
			got = string(bs[0].Payload)
		}
	}
	return got, nil
}

// TestForeignObjectIsCorrupt: an object copied over another stream's
// object of the same name (a chunk slot, a manifest, an index page, a
// generation) is ErrCorrupt, never served as that stream's data: every
// checksum is bound to the stream and incarnation.
func TestForeignObjectIsCorrupt(t *testing.T) {
	for _, c := range []struct {
		what string
		key  func(l layout) string
	}{
		{"chunk", func(l layout) string { return l.chunk(1) }},
		{"fence chunk", func(l layout) string { return l.chunk(0) }},
		{"manifests", nil},
		{"generation", func(l layout) string { return genKey(l.name, 0) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			mem, lx, ly := twoStreams(t)
			if got, err := readX(t, mem, false); err != nil || got != "x" {
				t.Fatalf("sx before the copy: %q, %v", got, err)
			}
			if c.key != nil {
				copyObject(t, mem, c.key(ly), c.key(lx))
			}
			for v := uint64(0); c.key == nil; v++ {
				if _, err := mem.Stat(context.Background(), ly.manifest(v)); err != nil {
					break
				}
				copyObject(t, mem, ly.manifest(v), lx.manifest(v))
			}
			got, err := readX(t, mem, true)
			if !errors.Is(err, stream.ErrCorrupt) {
				t.Fatalf("sx with sy's %s copied over its own: read %q, err %v; want ErrCorrupt", c.what, got, err)
			}
		})
	}
	t.Run("index page", func(t *testing.T) {
		ctx := context.Background()
		mem := NewMemStorage()
		opts := Options{Driver: "identity-test", CheckpointChunks: 4, IndexPageEntries: 4}
		s := newTestStore(t, keepOpen{mem}, opts)
		for _, name := range []string{"px", "py"} {
			w := mustOpen(t, s, name, 1)
			appendEach(t, w, 0, 12)
			_ = w.Close()
		}
		lx, mx := newestManifest(t, mem, "px")
		ly, my := newestManifest(t, mem, "py")
		if len(mx.Pages) == 0 || len(my.Pages) == 0 {
			t.Fatal("no index pages written")
		}
		// The same page name in px's incarnation, with py's bytes: sy's
		// page renamed to the key px's manifest names.
		px := mx.Pages[0]
		b, err := mem.Get(ctx, ly.page(my.Pages[0]), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		// As if py had written a page of that name: the id px's manifest
		// expects, checksummed as py writes, so only the binding can tell.
		copy(b[3:19], px.ID[:])
		binary.BigEndian.PutUint32(b[len(b)-4:], stream.Checksum(b[:len(b)-4])^seedFor(b[2], ly.seed))
		if err := mem.Put(ctx, lx.page(px), b); err != nil {
			t.Fatal(err)
		}
		s2 := newTestStore(t, keepOpen{mem}, opts)
		if _, err := s2.Open(ctx, "px", stream.OpenOptions{Mode: stream.ModeReadOnly}); !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("px with py's index page over its own: %v, want ErrCorrupt", err)
		}
	})
}

// TestLegacyObjectsStayReadable: objects written before checksums were
// bound to their stream (no boundFlag) are still read.
func TestLegacyObjectsStayReadable(t *testing.T) {
	ctx := context.Background()
	mem := NewMemStorage()
	opts := Options{Driver: "identity-test", CheckpointChunks: 4, IndexPageEntries: 4}
	s := newTestStore(t, keepOpen{mem}, opts)
	w := mustOpen(t, s, "old", 1)
	appendEach(t, w, 0, 12)
	_ = w.Close()
	_ = s.Close()
	for _, k := range mem.Keys() {
		b, err := mem.Get(ctx, k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Put(ctx, k, asLegacy(b)); err != nil {
			t.Fatal(err)
		}
	}
	s2 := newTestStore(t, keepOpen{mem}, opts)
	w2 := mustOpen(t, s2, "old", 2)
	defer w2.Close()
	checkBatches(t, fetchAll(t, w2, 0), 0, 12)
}

// TestListWithForeignGeneration: a stream whose generation is another
// stream's object (as a store on another prefix of the same bucket sees
// that store's streams) is listed, not an error of List: opening it is
// where the corruption is reported.
func TestListWithForeignGeneration(t *testing.T) {
	mem, lx, ly := twoStreams(t)
	copyObject(t, mem, genKey(ly.name, 0), genKey(lx.name, 0))
	s := newTestStore(t, keepOpen{mem}, Options{Driver: "identity-test"})
	names, err := s.List(context.Background(), "")
	if err != nil || len(names) != 2 {
		t.Fatalf("List with a foreign generation: %v, %v; want both names", names, err)
	}
}
