package lazyfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// powerCycle cuts the power, unmounts, restarts and mounts again.
func powerCycle(t *testing.T, f *FS, dir string) {
	t.Helper()
	f.Cut()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	fl, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fl.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fl.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestOnlyDurableSurvives: after a power cut, a file is there with its
// fsynced bytes only when its directory entry was fsynced too; a
// directory, a link, a rename whose parent was not fsynced are undone;
// operations after the cut fail with EIO.
func TestOnlyDurableSurvives(t *testing.T) {
	f, dir := MountTemp(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	writeFile(t, p("durable"), []byte("one"), true)
	writeFile(t, p("unsynced-data"), []byte("two"), false)
	writeFile(t, p("renamed"), []byte("three"), true)
	if err := os.Mkdir(p("sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir) // entries so far: durable, unsynced-data, renamed, sub
	writeFile(t, p("unsynced-entry"), []byte("four"), true)
	if err := os.Mkdir(p("unsynced-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p("sub/inner"), []byte("five"), true) // sub itself never fsynced
	if err := os.Link(p("durable"), p("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("renamed"), p("new-name")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p("link")); err != nil || fi.Size() != 3 {
		t.Fatalf("link before the cut: %v, %v", fi, err)
	}
	f.Cut()
	if _, err := os.ReadFile(p("durable")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after the cut: %v, want EIO", err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"durable": "one", "unsynced-data": "", "renamed": "three"}
	for name, data := range want {
		if got, err := os.ReadFile(p(name)); err != nil || string(got) != data {
			t.Errorf("%s after the cut: %q, %v; want %q", name, got, err, data)
		}
	}
	for _, name := range []string{"unsynced-entry", "unsynced-dir", "sub/inner", "link", "new-name"} {
		if _, err := os.Lstat(p(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the cut: %v, want it gone", name, err)
		}
	}
	if fi, err := os.Stat(p("sub")); err != nil || !fi.IsDir() {
		t.Errorf("sub after the cut: %v, %v; want the directory", fi, err)
	}
	// And what is fsynced after the restart holds through the next cut.
	writeFile(t, p("sub/again"), []byte("six"), true)
	syncDir(t, p("sub"))
	powerCycle(t, f, dir)
	if got, err := os.ReadFile(p("sub/again")); err != nil || string(got) != "six" {
		t.Errorf("sub/again after the second cut: %q, %v", got, err)
	}
	if s := f.Stats(); s.Cuts != 2 || s.FileSyncs == 0 || s.DirSyncs == 0 {
		t.Errorf("stats %+v", s)
	}
}
