package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestBuiltinNeverCompilesPlantedSource: a go.mod of this module planted in
// a parent directory of the working directory, with a main package at
// every built-in driver's path, never runs: `strata drivers` (which starts
// every built-in) still describes the real drivers, and the planted code
// leaves no trace.
func TestBuiltinNeverCompilesPlantedSource(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "planted-code-ran")
	write := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module github.com/stratastream/strata\n\ngo 1.26.0\n")
	for _, d := range builtinDrivers {
		write(filepath.Join("drivers", d, "cmd", "strata-driver-"+d, "main.go"), fmt.Sprintf(`package main

import "os"

func main() {
	_ = os.WriteFile(%q, []byte(%q), 0o644)
	os.Exit(1)
}
`, marker, d))
	}
	wd := filepath.Join(root, "work", "dir")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	t.Setenv("STRATA_SRC", "")
	t.Setenv("STRATA_PLUGIN_DIR", "")
	t.Setenv("STRATA_CACHE", t.TempDir())

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"drivers", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("strata drivers: exit %d: %s", code, stderr.String())
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("planted code of the %s driver ran (a go.mod in a parent directory was built)", b)
	}
	var entries []driverEntry
	if err := json.Unmarshal(stdout.Bytes(), &entries); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, stdout.String())
	}
	for _, e := range entries {
		if e.Name == "memory" && (e.Info == nil || e.Info.Driver != "memory") {
			t.Fatalf("the built-in memory driver did not start: %+v", e)
		}
	}
}
