//go:build linux

package nfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
)

// takesDirect reports whether the file system of dir opens files with
// O_DIRECT, asked directly, not through the driver's probe.
func takesDirect(t *testing.T, dir string) bool {
	t.Helper()
	path := filepath.Join(dir, "direct-probe")
	fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_DIRECT, 0o644)
	if err == nil {
		syscall.Close(fd)
	}
	os.Remove(path)
	return err == nil
}

// TestDirectWrites: on a file system that takes O_DIRECT, a put of
// DirectMinBytes or more from an aligned buffer goes out with O_DIRECT and
// reads back byte for byte; small, unaligned or direct_io: false puts go
// through the page cache and read back the same.
func TestDirectWrites(t *testing.T) {
	root := freshRoot(t)
	st, err := openStorage(t.Context(), configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	align := int(st.dioAlign.Load())
	if want := takesDirect(t, root); want != (align > 0) {
		t.Fatalf("the driver's probe found alignment %d, but O_DIRECT opens on %s: %v", align, root, want)
	}
	if align == 0 {
		t.Fatalf("the testbed's file system under %s refuses O_DIRECT: this test needs one that takes it (ext4, xfs, NFS)", root)
	}
	t.Logf("direct writes aligned to %d bytes", align)
	cases := []struct {
		name   string
		data   []byte
		direct bool
	}{
		{"aligned 1 MiB + 123", alignedBytes(1<<20+123, align, 1), true},
		{"aligned, exactly DirectMinBytes", alignedBytes(DirectMinBytes, align, 2), true},
		{"aligned, below DirectMinBytes", alignedBytes(DirectMinBytes-1, align, 3), false},
		{"unaligned 1 MiB", alignedBytes(1<<20+1, align, 4)[1:], false},
		{"4 KiB", alignedBytes(4096, align, 5), false},
	}
	for i, c := range cases {
		before := st.directWrites.Load()
		key := "s/c/" + strconv.Itoa(i)
		if err := st.PutIfAbsent(t.Context(), key, c.data); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := st.directWrites.Load() - before; got != map[bool]int64{true: 1, false: 0}[c.direct] {
			t.Errorf("%s: %d direct writes, want direct=%v", c.name, got, c.direct)
		}
		got, err := st.Get(t.Context(), key, 0, -1)
		if err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s: read back %d of %d bytes (equal: %v), %v", c.name, len(got), len(c.data), bytes.Equal(got, c.data), err)
		}
	}

	// A direct write the file system refuses (here: a length that is no
	// multiple of its block size, as if the probe had got the alignment
	// wrong) turns direct writes off and the put still lands whole.
	st.dioAlign.Store(1)
	odd := alignedBytes(DirectMinBytes+1, align, 7)
	if err := st.PutIfAbsent(t.Context(), "s/c/refused", odd); err != nil {
		t.Fatalf("put after a refused direct write: %v", err)
	}
	if a := st.dioAlign.Load(); a != 0 {
		t.Fatalf("after a refused direct write the alignment is %d, want 0 (off)", a)
	}
	if got, err := st.Get(t.Context(), "s/c/refused", 0, -1); err != nil || !bytes.Equal(got, odd) {
		t.Fatalf("put after a refused direct write: read back %d of %d bytes, %v", len(got), len(odd), err)
	}

	off, err := openStorage(t.Context(), configFor(freshRoot(t), "direct_io: false"))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	data := alignedBytes(1<<20, align, 6)
	if err := off.PutIfAbsent(t.Context(), "s/c/0", data); err != nil {
		t.Fatal(err)
	}
	if n := off.directWrites.Load(); n != 0 || off.dioAlign.Load() != 0 {
		t.Fatalf("direct_io: false: %d direct writes, alignment %d", n, off.dioAlign.Load())
	}
	if got, err := off.Get(t.Context(), "s/c/0", 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("direct_io: false: read back %d bytes, %v", len(got), err)
	}
}

// TestEngineChunksWriteDirect: the engine's chunks of 1 MiB appends are
// large and aligned enough to go out with O_DIRECT (the engine allocates
// each segment on its own), and read back intact through a new session.
func TestEngineChunksWriteDirect(t *testing.T) {
	c, err := ParseConfig(configFor(freshRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenStorage(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	store, err := driverconfig.NewStore(st, c.engineOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := store.Open(t.Context(), "direct", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	var futures []*stream.AppendFuture
	for i := range 16 {
		p := bytes.Repeat([]byte{byte(i + 1)}, 1<<20)
		want = append(want, p)
		futures = append(futures, s.Append(t.Context(), stream.Batch{Count: 1, Payload: p}))
	}
	for _, f := range futures {
		if _, err := f.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := st.directWrites.Load(); n == 0 {
		t.Fatalf("no chunk of 16 × 1 MiB appends went out with O_DIRECT (%d puts)", st.RequestStats().Puts)
	} else {
		t.Logf("%d of %d puts direct", n, st.RequestStats().Puts)
	}
	r, err := store.Open(t.Context(), "direct", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	log, err := readLog(t, r)
	if err != nil || len(log) != len(want) {
		t.Fatalf("read back %d batches of %d: %v", len(log), len(want), err)
	}
	for i, b := range log {
		if !bytes.Equal(b.Payload, want[i]) {
			t.Fatalf("offset %d: the payload read back differs from the one appended", b.BaseOffset)
		}
	}
}

// TestFullDiskDirect: on a small ext4 file system (a loop mount), direct
// puts fail with ErrUnavailable wrapping ENOSPC once it is full, leave no
// temp file, and every put before stays readable.
func TestFullDiskDirect(t *testing.T) {
	root := mountExt4(t, "8M")
	st, err := openStorage(t.Context(), configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	align := int(st.dioAlign.Load())
	if align == 0 {
		t.Fatal("ext4 on a loop device refused O_DIRECT")
	}
	var stored [][]byte
	var full error
	for i := range 100 {
		p := alignedBytes(700_000, align, i)
		if full = st.PutIfAbsent(t.Context(), "s/c/"+strconv.Itoa(i), p); full != nil {
			break
		}
		stored = append(stored, p)
	}
	if !errors.Is(full, stream.ErrUnavailable) || !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("direct put on a full disk: got %v, want ErrUnavailable wrapping ENOSPC", full)
	}
	if len(stored) == 0 || st.directWrites.Load() != int64(len(stored)) {
		t.Fatalf("%d puts fitted, %d direct", len(stored), st.directWrites.Load())
	}
	t.Logf("%d direct puts fitted; then: %v", len(stored), full)
	for i, p := range stored {
		got, err := st.Get(t.Context(), "s/c/"+strconv.Itoa(i), 0, -1)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("Get of put %d on the full disk: %d bytes, %v", i, len(got), err)
		}
	}
	if names := dirNames(t, filepath.Join(root, tmpDir)); len(names) != 0 {
		t.Fatalf("temp files left after failed puts: %q", names)
	}
}

// mountExt4 makes an ext4 file system of the given size (e.g. "8M") in an
// image file and loop-mounts it on a new directory, unmounted when t ends.
// The tests run as root; a machine where this fails fails the test.
func mountExt4(t *testing.T, size string) string {
	t.Helper()
	base := freshRoot(t)
	img, dir := filepath.Join(base, "ext4.img"), filepath.Join(base, "ext4")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"truncate", "-s", size, img}, {"mkfs.ext4", "-q", "-F", img}, {"mount", "-o", "loop", img, dir}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v (the direct full-disk test needs root and loop devices): %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// TestDirectIODefault: direct writes follow fsync unless set.
func TestDirectIODefault(t *testing.T) {
	for _, c := range []struct {
		extra []string
		want  bool
	}{
		{nil, true},
		{[]string{"fsync: false"}, false},
		{[]string{"fsync: false", "direct_io: true"}, true},
		{[]string{"direct_io: false"}, false},
	} {
		cfg, err := ParseConfig(configFor("/x", c.extra...))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.directIO(); got != c.want {
			t.Errorf("%q: direct I/O %v, want %v", c.extra, got, c.want)
		}
	}
}
