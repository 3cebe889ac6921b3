package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDriversJSON(t *testing.T) {
	ctx := context.Background()
	mem, err := resolveDriver("memory")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A wrapper of a real driver, and a binary that is not a driver.
	wrapper := "#!/bin/sh\nexec '" + mem.Path + "' " + strings.Join(mem.Args, " ") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "strata-driver-vendor"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "strata-driver-bogus"), []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_PLUGIN_DIR", dir)

	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"drivers", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var entries []driverEntry
	if err := json.Unmarshal(stdout.Bytes(), &entries); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, stdout.String())
	}
	byName := map[string]driverEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	for _, name := range []string{"memory", "nfs", "vendor"} {
		e := byName[name]
		if e.Info == nil || e.Error != "" {
			t.Errorf("%s: no Info (error %q)", name, e.Error)
		}
	}
	if e := byName["memory"]; e.Info != nil && (e.Info.Driver != "memory" || e.Info.Durable) {
		t.Errorf("memory Info = %+v", *e.Info)
	}
	if e := byName["nfs"]; e.Info != nil && !e.Info.Durable {
		t.Errorf("nfs Info not durable: %+v", *e.Info)
	}
	if e := byName["bogus"]; e.Info != nil || e.Error == "" {
		t.Errorf("a non-driver binary was accepted: %+v", e)
	}
	for _, name := range builtinDrivers {
		if _, ok := byName[name]; !ok {
			t.Errorf("built-in %s missing from the list", name)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !bytes.Contains(stderr.Bytes(), []byte(`unknown command "frobnicate"`)) {
		t.Fatalf("stderr = %q", stderr.String())
	}
}
