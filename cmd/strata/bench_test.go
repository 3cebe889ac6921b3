package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratastream/strata/internal/bench"
)

// TestBenchJSON runs a short append benchmark on the memory driver
// in-process and checks the JSON report, the files under --out and that
// `strata bench report` renders the Markdown section from them.
func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--workload", "append,sharedlog", "--batch", "1KiB,4KiB",
		"--duration", "100ms", "--warmup", "0s", "--runs", "1", "--json", "--out", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON report: %v\n%s", err, stdout.String())
	}
	if len(rep.Results) != 4 || rep.Meta.GoVersion == "" {
		t.Fatalf("report: %d results, meta %+v; want 4 configurations", len(rep.Results), rep.Meta)
	}
	if c := rep.Results[1].Config; c.Workload != bench.WorkloadAppend || c.BatchBytes != 4<<10 || c.Driver != "memory" {
		t.Errorf("second configuration %+v, want append of 4 KiB on memory", c)
	}
	if !strings.Contains(stderr.String(), "configuration") {
		t.Errorf("the table did not go to stderr with --json:\n%s", stderr.String())
	}
	for _, f := range []string{"report.json", "throughput.png", "latency.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	md := filepath.Join(dir, "section.md")
	if code := run(context.Background(), []string{"bench", "report", "--md", md, "--chart-path", "bench", filepath.Join(dir, "report.json")}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench report: exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| append memory/in b=4KiB i=16 s=1 | append |") || !strings.Contains(string(b), "](bench/latency.png)") {
		t.Errorf("section lacks the append row or the chart link:\n%s", b)
	}
}

// TestBenchBadInput checks that bad flags and impossible configurations
// exit 2 before running anything.
func TestBenchBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--workload", "nope"},
		{"bench", "--batch", "0"},
		{"bench", "--inflight", "x"},
		{"bench", "--process", "sideways"},
		{"bench", "--workload", "produce-consume"},
		{"bench", "--workload", "raw", "--process", "out"},
		{"bench", "--workload", "produce-consume", "--brokers", "x:1", "--rate", "-1"},
		{"bench", "--workload", "produce-consume", "--brokers", "x:1", "--streams", "2", "--active-partitions", "5"},
		{"bench", "--workload", "append", "--rate", "100"},
		{"bench", "--workload", "produce-consume", "--brokers", "x:1", "--settle", "-1s"},
		{"bench", "--driver", "memory", "--linger", "5ms", "--duration", "10ms", "--runs", "1", "--warmup", "0s", "--json"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		want := 2
		if args[len(args)-1] == "--json" {
			want = 1 // the linger is refused when the configuration runs
		}
		if code != want {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, want, stderr.String())
		}
	}
}
