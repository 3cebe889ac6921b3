package nfs

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
	"github.com/stratastream/strata/stream"
)

// treeState lists every path under dir with its size and modification
// time, to show that nothing was touched.
func treeState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, path+" "+strconv.FormatInt(fi.Size(), 10)+" "+fi.ModTime().Format(time.RFC3339Nano)+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeysEscapingRootRefused: keys that could leave the root (or are
// otherwise malformed) fail with ErrInvalidArgument before any file is
// touched, in every operation; a Delete naming one bad key removes nothing.
func TestKeysEscapingRootRefused(t *testing.T) {
	parent := freshRoot(t)
	root := filepath.Join(parent, "store")
	st, err := openStorage(t.Context(), configFor(root, "create_root: true"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	if err := st.PutIfAbsent(ctx, "ok/key", []byte("keep me")); err != nil {
		t.Fatal(err)
	}
	// A sibling file the bad keys aim at.
	if err := os.WriteFile(filepath.Join(parent, "victim"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"../victim", "../../victim", "ok/../../victim", "ok/../../../etc/passwd",
		"/etc/passwd", "/victim", "ok/\x00x", "ok\x00/../victim", "\x00",
		"", ".", "..", "ok/.", "ok/..", "./ok", "ok//key", "ok/", "/",
		"ok/key\n", "ok key", "ok\\..\\victim", "ok/ké", "~", "ok/*",
		strings.Repeat("a", maxKeyLen+1), "ok/" + strings.Repeat("b", maxElemLen+1),
	}
	before := treeState(t, parent)
	for _, k := range bad {
		checks := map[string]error{
			"PutIfAbsent": st.PutIfAbsent(ctx, k, []byte("x")),
			"Put":         st.Put(ctx, k, []byte("x")),
			"Delete":      st.Delete(ctx, []string{k}),
			"Delete+ok":   st.Delete(ctx, []string{"ok/key", k}),
			"List":        func() error { _, err := st.List(ctx, k+"/", "", 0); return err }(),
		}
		_, checks["Get"] = st.Get(ctx, k, 0, -1)
		_, checks["Stat"] = st.Stat(ctx, k)
		for op, err := range checks {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Errorf("%s(%q): got %v, want ErrInvalidArgument", op, k, err)
			}
		}
	}
	if after := treeState(t, parent); !slices.Equal(before, after) {
		t.Fatalf("bad keys touched files:\nbefore %q\nafter  %q", before, after)
	}
	for _, p := range []string{"a", "a/b"} { // list prefixes without the '/'
		if _, err := st.List(ctx, p, "", 0); !errors.Is(err, stream.ErrInvalidArgument) {
			t.Errorf("List(%q): got %v, want ErrInvalidArgument", p, err)
		}
	}
}

// TestRootGone: with the store's directory moved away (testbed/ctl nfs
// --root DIR stop), every operation is ErrUnavailable, never ErrNotFound,
// and nothing is recreated in its place; after start all works again.
func TestRootGone(t *testing.T) {
	root := filepath.Join(freshRoot(t), "store")
	st, err := openStorage(t.Context(), configFor(root, "create_root: true"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	if err := st.PutIfAbsent(ctx, "s/c/1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	ctl := func(action string) {
		t.Helper()
		drivertest.Ctl(t, "nfs", "--root", root, action)
	}
	ctl("stop")
	checks := map[string]error{
		"PutIfAbsent":         st.PutIfAbsent(ctx, "s/c/2", []byte("two")),
		"PutIfAbsent new dir": st.PutIfAbsent(ctx, "t/c/1", []byte("x")),
		"Put":                 st.Put(ctx, "s/hint", []byte("h")),
		"Delete":              st.Delete(ctx, []string{"s/c/1"}),
		"List":                func() error { _, err := st.List(ctx, "s/", "", 0); return err }(),
	}
	_, checks["Get"] = st.Get(ctx, "s/c/1", 0, -1)
	_, checks["Get absent"] = st.Get(ctx, "s/c/9", 0, -1)
	_, checks["Stat"] = st.Stat(ctx, "s/c/1")
	for op, err := range checks {
		if !errors.Is(err, stream.ErrUnavailable) {
			t.Errorf("%s with the root gone: got %v, want ErrUnavailable", op, err)
		}
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the driver recreated the moved-away root %s: %v", root, err)
	}
	if _, err := openStorage(ctx, configFor(root)); !errors.Is(err, stream.ErrUnavailable) {
		t.Errorf("OpenStorage with the root gone: got %v, want ErrUnavailable", err)
	}
	ctl("start")
	// A removed tmp/ is made again by the next put.
	if err := os.Remove(filepath.Join(root, tmpDir)); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "s/c/1", 0, -1)
	if err != nil || string(got) != "one" {
		t.Fatalf("Get after start = %q, %v; want one", got, err)
	}
	if err := st.PutIfAbsent(ctx, "s/c/2", []byte("two")); err != nil {
		t.Fatalf("PutIfAbsent after start: %v", err)
	}
}

// TestFullDisk: on a small tmpfs, puts fail with ErrUnavailable (wrapping
// ENOSPC) once the disk is full, every object put before stays readable,
// no temp file is left behind, and puts work again once space is freed.
func TestFullDisk(t *testing.T) {
	root := mountTmpfs(t, "1m")
	st, err := openStorage(t.Context(), configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	var stored []string
	var full error
	for i := 0; i < 1000; i++ {
		key := "s/c/" + strconv.Itoa(i)
		err := st.PutIfAbsent(ctx, key, bytes.Repeat([]byte{byte(i)}, 100_000))
		if err != nil {
			full = err
			break
		}
		stored = append(stored, key)
	}
	if !errors.Is(full, stream.ErrUnavailable) || !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("put on a full disk: got %v, want ErrUnavailable wrapping ENOSPC", full)
	}
	if len(stored) == 0 {
		t.Fatal("no put fitted on the 1 MiB tmpfs")
	}
	t.Logf("%d puts fitted; then: %v", len(stored), full)
	if err := st.Put(ctx, "s/hint", bytes.Repeat([]byte{1}, 200_000)); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("Put on a full disk: got %v, want ErrUnavailable", err)
	}
	for i, key := range stored {
		got, err := st.Get(ctx, key, 0, -1)
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, 100_000)) {
			t.Fatalf("Get(%q) on the full disk: %d bytes, %v", key, len(got), err)
		}
	}
	if names := dirNames(t, filepath.Join(root, tmpDir)); len(names) != 0 {
		t.Fatalf("temp files left after failed puts: %q", names)
	}
	if err := st.Delete(ctx, stored[:2]); err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(ctx, "s/c/again", bytes.Repeat([]byte{7}, 100_000)); err != nil {
		t.Fatalf("put after freeing space: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of the given size (e.g. "1m") on a new
// directory, unmounted when t ends. The tests run as root; a machine where
// mounting fails fails the test.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(freshRoot(t), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -t tmpfs -o size=%s (the full-disk test needs root): %v\n%s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestTornTempCleanup: opening a Storage removes the temp files of dead
// processes of this host at once and anyone's older than temp_max_age, and
// keeps the rest (a live writer's put in progress) and every file whose
// name is not a temp name of this driver, however old (with root "/",
// tmp/ is /tmp).
func TestTornTempCleanup(t *testing.T) {
	root := freshRoot(t)
	st, err := openStorage(t.Context(), configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	me := hostID()
	files := map[string]bool{ // name -> should survive
		me + "-" + strconv.Itoa(dead.Process.Pid) + "-aa-1.tmp": false, // dead process, this host
		me + "-" + strconv.Itoa(os.Getpid()) + "-bb-1.tmp":      true,  // this live process
		me + "-1-cc-1.tmp": true, // pid 1 lives
		"otherhost.1-" + strconv.Itoa(dead.Process.Pid) + "-dd-1.tmp": true,  // another host: only by age
		"otherhost.1-77-ee-1.tmp":                                     false, // another host, old
		"garbage":                                                     true,  // recent, unparsable
		"oldgarbage":                                                  true,  // old, not a temp name: not ours
		"report-2024-q1-draft.tmp":                                    true,  // old, not a temp name: not ours
	}
	old := time.Now().Add(-2 * time.Hour)
	for name := range files {
		path := filepath.Join(root, tmpDir, name)
		if err := os.WriteFile(path, []byte("torn"), 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "otherhost.1-77-ee-1.tmp" || name == "oldgarbage" || name == "report-2024-q1-draft.tmp" {
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A writer killed between link and unlink leaves its temp name linked
	// to a published object: removing the temp name must not touch it.
	if err := st.PutIfAbsent(t.Context(), "s/c/1", []byte("published")); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("PutIfAbsent after Close: got %v, want ErrClosed", err)
	}
	st1, err := openStorage(t.Context(), configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	if err := st1.PutIfAbsent(t.Context(), "s/c/1", []byte("published")); err != nil {
		t.Fatal(err)
	}
	st1.Close()
	linked := me + "-" + strconv.Itoa(dead.Process.Pid) + "-ff-2.tmp"
	if err := os.Link(filepath.Join(root, keyPath("s/c/1")), filepath.Join(root, tmpDir, linked)); err != nil {
		t.Fatal(err)
	}
	files[linked] = false
	st2, err := openStorage(t.Context(), configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if got, err := st2.Get(t.Context(), "s/c/1", 0, -1); err != nil || string(got) != "published" {
		t.Fatalf("published object after its temp name was cleaned: %q, %v", got, err)
	}
	left := dirNames(t, filepath.Join(root, tmpDir))
	for name, keep := range files {
		if slices.Contains(left, name) != keep {
			t.Errorf("temp file %s: kept=%v, want kept=%v", name, !keep, keep)
		}
	}
	keys, err := st2.List(t.Context(), "", "", 0)
	if err != nil || !slices.Equal(keys, []string{"s/c/1"}) {
		t.Fatalf("List = %q, %v; want only s/c/1 (temp files never show)", keys, err)
	}
}

// TestTempCleanupNeverFollowsSymlinks: a tmp/ that is a symlink out of the
// root, and symlinks inside tmp/ named like temp files, lead the cleanup
// nowhere: nothing outside the root is removed.
func TestTempCleanupNeverFollowsSymlinks(t *testing.T) {
	outside := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	write := func(path string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("not the store's"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	tempName := "otherhost.1-77-ee-1.tmp" // a temp name of another host, old: torn if it were in tmp/
	victims := []string{filepath.Join(outside, tempName), filepath.Join(outside, "notes.txt")}
	for _, v := range victims {
		write(v)
	}

	// tmp/ itself a symlink to the outside directory.
	root := freshRoot(t)
	if err := os.Symlink(outside, filepath.Join(root, tmpDir)); err != nil {
		t.Fatal(err)
	}
	st, err := openStorage(t.Context(), configFor(root))
	if err == nil {
		st.Close()
	}
	// A symlink in tmp/, named like a torn temp file, to a file outside.
	root2 := freshRoot(t)
	if err := os.MkdirAll(filepath.Join(root2, tmpDir), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root2, tmpDir, tempName)
	if err := os.Symlink(victims[0], link); err != nil {
		t.Fatal(err)
	}
	st2, err := openStorage(t.Context(), configFor(root2))
	if err != nil {
		t.Fatal(err)
	}
	st2.Close()
	for _, v := range victims {
		if _, err := os.Stat(v); err != nil {
			t.Errorf("%s outside the root after the temp cleanup: %v", v, err)
		}
	}
}

// TestCreatedModes: the files and directories the Storage creates (the
// root with create_root, objects/, tmp/, key directories, object files)
// have file_mode and dir_mode, private by default (0600, 0700), with the
// process umask applied on top.
func TestCreatedModes(t *testing.T) {
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	for _, c := range []struct {
		extra     []string
		file, dir fs.FileMode
	}{
		{nil, 0o600, 0o700},
		{[]string{`file_mode: "0640"`, `dir_mode: "0750"`}, 0o640, 0o750},
	} {
		root := filepath.Join(freshRoot(t), "new", "root")
		st, err := openStorage(t.Context(), configFor(root, append([]string{"create_root: true"}, c.extra...)...))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutIfAbsent(t.Context(), "a.stream/inc/c/1", []byte("record")); err != nil {
			t.Fatal(err)
		}
		st.Close()
		want := func(path string, mode fs.FileMode) {
			t.Helper()
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fi.Mode().Perm(), mode&^fs.FileMode(umask); got != want {
				t.Errorf("%s: mode %v, want %v (%v)", path, got, want, c.extra)
			}
		}
		want(filepath.Join(root, keyPath("a.stream/inc/c/1")), c.file)
		for _, d := range []string{"", objectsDir, tmpDir} {
			want(filepath.Join(root, d), c.dir)
		}
		for d := filepath.Dir(keyPath("a.stream/inc/c/1")); d != objectsDir; d = filepath.Dir(d) {
			want(filepath.Join(root, d), c.dir) // the key's directories
		}
		want(filepath.Dir(root), c.dir) // made by create_root too
	}
}

// TestCreateRootIsDurable: every directory create_root makes is durable:
// the parent of each (up to the first that existed) is fsynced after it,
// or a power loss can drop the whole root with every acked record in it
// (a FUSE layer that keeps only what was fsynced lost 935 acked records
// that way).
func TestCreateRootIsDurable(t *testing.T) {
	base := freshRoot(t)
	root := filepath.Join(base, "a", "b", "data")
	var mu sync.Mutex
	synced := map[string]bool{}
	hook := func(dir string) { mu.Lock(); synced[dir] = true; mu.Unlock() }
	syncDirHook.Store(&hook)
	defer syncDirHook.Store(nil)
	st, err := openStorage(t.Context(), configFor(root, "create_root: true"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, dir := range []string{base, filepath.Join(base, "a"), filepath.Join(base, "a", "b"), root} {
		if !synced[dir] {
			t.Errorf("%s: not fsynced after a directory was made in it (synced: %v)", dir, slices.Sorted(maps.Keys(synced)))
		}
	}
}
