package hdfs

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
)

// TestStorage runs the chunked.Storage suite against the HDFS testbed,
// with racing put-if-absent writers in separate processes.
func TestStorage(t *testing.T) {
	drivertest.RunStorage(t, opener.OpenStorage, func(t *testing.T) []byte { return marshal(t, freshConfig(t)) })
}

// TestNestedKeys: a key and longer keys under it ("a", "a/b") are
// independent objects: each can be taken, read, listed and deleted.
func TestNestedKeys(t *testing.T) {
	ctx := t.Context()
	st, err := OpenStorage(ctx, freshConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, k := range []string{"a/b", "a", "a/b/c"} {
		if err := st.PutIfAbsent(ctx, k, []byte(k)); err != nil {
			t.Fatalf("PutIfAbsent(%s): %v", k, err)
		}
	}
	for _, k := range []string{"a", "a/b", "a/b/c"} {
		if err := st.PutIfAbsent(ctx, k, []byte("again")); !errors.Is(err, stream.ErrAlreadyExists) {
			t.Fatalf("second PutIfAbsent(%s) = %v, want ErrAlreadyExists", k, err)
		}
		if b, err := st.Get(ctx, k, 0, -1); err != nil || string(b) != k {
			t.Fatalf("Get(%s) = %q, %v", k, b, err)
		}
	}
	if keys, err := st.List(ctx, "a/", "", 0); err != nil || !slices.Equal(keys, []string{"a/b", "a/b/c"}) {
		t.Fatalf(`List("a/") = %q, %v; want [a/b a/b/c]`, keys, err)
	}
	if err := st.Delete(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, "a"); !errors.Is(err, stream.ErrNotFound) {
		t.Fatalf("Stat(a) after Delete = %v, want ErrNotFound", err)
	}
	if keys, err := st.List(ctx, "", "", 0); err != nil || !slices.Equal(keys, []string{"a/b", "a/b/c"}) {
		t.Fatalf(`List("") after deleting a = %q, %v; want [a/b a/b/c]`, keys, err)
	}
}

// TestMultiBlockObject: an object larger than the block size spans several
// HDFS blocks; whole and ranged reads across block ends return its bytes.
func TestMultiBlockObject(t *testing.T) {
	ctx := t.Context()
	cfg := freshConfig(t)
	cfg.BlockSize = 64 << 10
	st, err := OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data := make([]byte, 200<<10+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := st.PutIfAbsent(ctx, "big", data); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Stat(ctx, "big"); err != nil || n != int64(len(data)) {
		t.Fatalf("Stat = %d, %v; want %d", n, err, len(data))
	}
	b, err := st.Get(ctx, "big", 0, -1)
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("Get whole: %d bytes, %v; equal %v", len(b), err, bytes.Equal(b, data))
	}
	off := int64(64<<10 - 100)
	b, err = st.Get(ctx, "big", off, 64<<10+200)
	if err != nil || !bytes.Equal(b, data[off:off+64<<10+200]) {
		t.Fatalf("Get across blocks: %d bytes, %v", len(b), err)
	}
}
