package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPooledClientPatchApplies: bench/franz-go-pool.patch (applied by
// bench/pooled-client) still fits the franz-go this module builds with:
// each hunk's old lines, context and removals, stand in its file as they
// are. An upgrade of franz-go that moves them fails here, not in the middle
// of a benchmark run.
func TestPooledClientPatchApplies(t *testing.T) {
	patch, err := os.ReadFile(filepath.Join("..", "..", "bench", "franz-go-pool.patch"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/twmb/franz-go: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	hunks := 0
	var file string
	var old []string
	check := func() {
		if len(old) == 0 {
			return
		}
		src, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(old, "\n") + "\n"; !strings.Contains(string(src), want) {
			t.Fatalf("a hunk of bench/franz-go-pool.patch does not fit %s in %s; its old lines:\n%s", file, dir, want)
		}
		hunks++
		old = nil
	}
	for _, line := range strings.Split(string(patch), "\n") {
		switch {
		case strings.HasPrefix(line, "--- a/"):
			check()
			file = strings.TrimPrefix(line, "--- a/")
		case strings.HasPrefix(line, "+++ "):
		case strings.HasPrefix(line, "@@"):
			check()
		case strings.HasPrefix(line, " "), strings.HasPrefix(line, "-"):
			old = append(old, line[1:])
		}
	}
	check()
	if hunks == 0 {
		t.Fatal("bench/franz-go-pool.patch has no hunks")
	}
}
