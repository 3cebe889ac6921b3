package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/stream/plugin"
)

// buildBinary builds a main package of the module into dir.
func buildBinary(t testing.TB, dir, name, pkg string, ldflags ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = runConformance(context.Background(), args, &o, &e)
	plugin.CleanupClients()
	return code, o.String(), e.String()
}

// TestConformanceMemoryJSON runs the whole suite on the memory driver
// through the CLI and checks the JSON report's exact shape and the JUnit
// file.
func TestConformanceMemoryJSON(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "junit.xml")
	code, stdout, stderr := runCLI(t, "--driver", "memory", "--json", "--junit", junit, "--seed", "42")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	// Exactly one JSON object on stdout.
	dec := json.NewDecoder(strings.NewReader(stdout))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value")
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"cases", "driver", "failed", "out_of_process", "passed", "skipped", "suite"}; !slices.Equal(keys, want) {
		t.Fatalf("report keys %v, want %v", keys, want)
	}
	var rep reportJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Driver != "memory" || !rep.OutOfProcess || rep.Suite != "stream" {
		t.Fatalf("report header %+v", rep)
	}
	all := conformance.Cases()
	if len(rep.Cases) != len(all) || rep.Passed+rep.Failed+rep.Skipped != len(all) {
		t.Fatalf("%d cases reported (%d/%d/%d), suite has %d", len(rep.Cases), rep.Passed, rep.Failed, rep.Skipped, len(all))
	}
	if rep.Failed != 0 || rep.Passed < 40 {
		t.Fatalf("memory driver: %d passed, %d failed", rep.Passed, rep.Failed)
	}
	var cases []map[string]json.RawMessage
	if err := json.Unmarshal(raw["cases"], &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var ck []string
		for k := range c {
			ck = append(ck, k)
		}
		slices.Sort(ck)
		if want := []string{"duration_ms", "error", "family", "name", "status"}; !slices.Equal(ck, want) {
			t.Fatalf("case keys %v, want %v", ck, want)
		}
		rc := rep.Cases[i]
		if rc.Name != all[i].FullName() || rc.Family != all[i].Family || !slices.Contains([]string{"pass", "fail", "skip"}, rc.Status) || rc.DurationMS < 0 {
			t.Fatalf("case %d: %+v", i, rc)
		}
		if rc.Status == "skip" && rc.Error == "" {
			t.Fatalf("case %s skipped without a reason", rc.Name)
		}
	}
	// Progress went to stderr, and the table too (stdout is JSON only).
	if !strings.Contains(stderr, "contract/empty-stream") || !strings.Contains(stderr, "passed,") {
		t.Fatalf("stderr lacks progress or table:\n%s", stderr)
	}
	// JUnit XML parses and counts the same.
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var ju junitSuites
	if err := xml.Unmarshal(b, &ju); err != nil {
		t.Fatalf("junit: %v", err)
	}
	n := 0
	for _, s := range ju.Suites {
		n += s.Tests
	}
	if n != len(all) {
		t.Fatalf("junit holds %d test cases, want %d", n, len(all))
	}
	checkGuideJSON(t, stdout, rep)
}

// TestConformanceFailsOnBrokenDriver runs a byte-flipping driver: the
// cases that catch it fail, the exit status is 1, the table names them and
// --run selects cases.
func TestConformanceFailsOnBrokenDriver(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir, "strata-driver-broken", "github.com/stratastream/strata/conformance/internal/broken/cmd/strata-driver-broken")
	cfg := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(cfg, []byte(`{"kind": "flips-byte", "namespace": "cli"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "--driver", bin, "--config", cfg, "--run", "^contract/(fetch-roundtrip|empty-stream)$", "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	var rep reportJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout)
	}
	if len(rep.Cases) != 2 || rep.Passed != 1 || rep.Failed != 1 {
		t.Fatalf("report %+v, want empty-stream pass and fetch-roundtrip fail", rep)
	}
	for _, c := range rep.Cases {
		if c.Name == "contract/fetch-roundtrip" && (c.Status != "fail" || !strings.Contains(c.Error, "payload")) {
			t.Fatalf("fetch-roundtrip: %+v", c)
		}
	}
	if !strings.Contains(stderr, "differs from the acked") {
		t.Fatalf("stderr lacks the failure's log:\n%s", stderr)
	}

	// Without --json the table is on stdout.
	code, stdout, _ = runCLI(t, "--driver", bin, "--config", cfg, "--run", "fetch-roundtrip")
	if code != 1 || !strings.Contains(stdout, "contract/fetch-roundtrip") || !strings.Contains(stdout, "fail") {
		t.Fatalf("exit %d, stdout:\n%s", code, stdout)
	}
}

// TestConformanceSuites: --suite sharedlog runs the SharedLog cases (named
// sharedlog/...), --suite all runs both suites.
func TestConformanceSuites(t *testing.T) {
	code, stdout, stderr := runCLI(t, "--driver", "memory", "--suite", "sharedlog", "--json")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	var rep reportJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout)
	}
	if rep.Suite != "sharedlog" || len(rep.Cases) == 0 || rep.Failed != 0 {
		t.Fatalf("report: suite %q, %d cases, %d failed", rep.Suite, len(rep.Cases), rep.Failed)
	}
	for _, c := range rep.Cases {
		if !strings.HasPrefix(c.Name, "sharedlog/") || !strings.HasPrefix(c.Family, "sharedlog/") || !strings.HasPrefix(c.Name, c.Family+"/") {
			t.Fatalf("sharedlog case %+v: want names and families under sharedlog/", c)
		}
	}
	code, stdout, stderr = runCLI(t, "--driver", "memory", "--suite", "all", "--run", "^(contract/empty-stream|sharedlog/.*)$", "--json")
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	var all reportJSON
	if err := json.Unmarshal([]byte(stdout), &all); err != nil {
		t.Fatal(err)
	}
	if all.Suite != "all" || len(all.Cases) != len(rep.Cases)+1 || all.Cases[0].Name != "contract/empty-stream" {
		t.Fatalf("--suite all: %d cases (first %q), want the stream case then %d sharedlog cases", len(all.Cases), all.Cases[0].Name, len(rep.Cases))
	}
}

// TestConformanceBadInput: bad input is one clear line on stderr and exit
// status 2.
func TestConformanceBadInput(t *testing.T) {
	dir := t.TempDir()
	notDriver := buildBinary(t, dir, "notadriver", "github.com/stratastream/strata/stream/plugin/testdata/notadriver")
	v2 := buildBinary(t, dir, "protocol2", "github.com/stratastream/strata/stream/plugin/testdata/baddriver", "-X main.protocolVersion=2")
	unreadable := t.TempDir() // a directory: unreadable as a file, even for root
	badConfig := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badConfig, []byte("no_such_field: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing binary", []string{"--driver", filepath.Join(dir, "nope")}, "no such file"},
		{"unknown name", []string{"--driver", "nosuchdriver"}, "neither a built-in"},
		{"not a driver", []string{"--driver", notDriver}, "notadriver"},
		{"wrong protocol", []string{"--driver", v2}, "protocol"},
		{"missing config", []string{"--driver", "memory", "--config", filepath.Join(dir, "none.yaml")}, "config"},
		{"unreadable config", []string{"--driver", "memory", "--config", unreadable}, "config"},
		{"config refused", []string{"--driver", "memory", "--config", badConfig}, "config"},
		{"no driver", nil, "--driver is required"},
		{"unknown suite", []string{"--driver", "memory", "--suite", "nope"}, "unknown --suite"},
		{"bad regexp", []string{"--driver", "memory", "--run", "("}, "--run"},
		{"no sharedlog case matches", []string{"--driver", "memory", "--suite", "sharedlog", "--run", "^contract/"}, "matches no case of the sharedlog suite"},
		{"no case matches", []string{"--driver", "memory", "--run", "^nothing$"}, "matches no case"},
		{"bad junit path", []string{"--driver", "memory", "--junit", filepath.Join(dir, "no/such/dir/j.xml")}, "--junit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			if stdout != "" {
				t.Fatalf("stdout not empty: %q", stdout)
			}
			t.Logf("stderr: %s", stderr)
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "strata conformance: ") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr %q: want one line starting with \"strata conformance: \" and holding %q", stderr, tc.want)
			}
		})
	}
}

// Without --config the nfs driver runs on a fresh local directory (the
// embedded default), removed afterwards.
func TestConformanceNFSDefaultDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, stdout, stderr := runCLI(t, "--driver", "nfs", "--run", "^contract/(empty-stream|fetch-roundtrip)$", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var rep reportJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if rep.Passed != 2 || rep.Failed != 0 {
		t.Fatalf("passed %d failed %d, want 2 and 0", rep.Passed, rep.Failed)
	}
	if !strings.Contains(stderr, "nfs driver on the local directory "+tmp) {
		t.Errorf("stderr does not name the directory under %s:\n%s", tmp, stderr)
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "strata-conformance-nfs-") {
			t.Errorf("directory %s left behind", e.Name())
		}
	}
}
