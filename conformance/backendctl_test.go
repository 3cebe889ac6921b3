package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDirectoryCtl: stop moves the directory away and start brings it back
// with its data, each idempotent; a driver that recreated the directory
// makes start fail; an unknown action exits 2. The path holds a quote and
// a space.
func TestDirectoryCtl(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a store")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "acked"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := DirectoryCtl(dir)
	run := func(action string) (int, string) {
		out, err := exec.Command("sh", "-c", ctl+" "+action).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, step := range []struct {
		action       string
		code         int
		dir, stopped bool
	}{
		{"stop", 0, false, true},
		{"stop", 0, false, true},
		{"start", 0, true, false},
		{"start", 0, true, false},
		{"restart", 2, true, false},
	} {
		if code, out := run(step.action); code != step.code {
			t.Fatalf("%s exited %d, want %d: %s", step.action, code, step.code, out)
		}
		if exists(dir) != step.dir || exists(dir+".stopped") != step.stopped {
			t.Fatalf("after %s: dir present %v, dir.stopped present %v; want %v, %v", step.action, exists(dir), exists(dir+".stopped"), step.dir, step.stopped)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "acked")); err != nil || string(b) != "data" {
		t.Fatalf("data after stop and start: %q, %v", b, err)
	}
	// A driver that recreated the directory while it was stopped.
	run("stop")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out := run("start"); code == 0 {
		t.Fatalf("start over a recreated directory exited 0: %s", out)
	}
}
