package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJavaClient runs the Apache Kafka Java client (kafka-clients 3.9.1
// from Maven Central, see testdata/java) against the broker: a producer
// with default settings (idempotent, acks=all) and a consumer group.
// It needs java, javac and mvn; the jars are cached in ~/.m2.
func TestJavaClient(t *testing.T) {
	if testing.Short() {
		t.Skip("Java client: not in -short")
	}
	for _, tool := range []string{"java", "javac", "mvn"} {
		requireTool(t, tool, "JDK 17 and Maven")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	work := t.TempDir()
	for _, f := range []string{"pom.xml", "StrataClientCheck.java"} {
		b, err := os.ReadFile(filepath.Join("testdata", "java", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = work
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	run("mvn", "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=lib")
	run("javac", "-cp", "lib/*", "StrataClientCheck.java")

	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr)
	createTopic(t, cl, "java", 3, nil)
	const n = 2000
	out := run("java", "-cp", "lib/*:.", "StrataClientCheck", addr, "java", fmt.Sprint(n), "java-group")

	seen := map[string]bool{}
	last := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var p, v string
		var off int64
		if _, err := fmt.Sscanf(line, "%s %d %s", &p, &off, &v); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		if seen[v] {
			t.Fatalf("%s consumed twice", v)
		}
		seen[v] = true
		if l, ok := last[p]; ok && off != l+1 {
			t.Fatalf("partition %s: offset %d after %d", p, off, l)
		}
		last[p] = off
	}
	for i := 0; i < n; i++ {
		if v := fmt.Sprintf("java-%06d", i); !seen[v] {
			t.Fatalf("%s produced and acked but not consumed", v)
		}
	}
	// The group committed the end of every partition.
	if total := committedSum(t, cl, "java-group"); total != n {
		t.Fatalf("java-group committed offsets sum to %d, want %d", total, n)
	}
}

// requireTool skips t when tool is not on $PATH, except under the full test
// command (scripts/test-all sets STRATA_FULL_TESTS=1 and installs the
// tools), where a missing tool fails the test: no silent skips in CI.
func requireTool(t *testing.T, tool, install string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("STRATA_FULL_TESTS") != "" {
			t.Fatalf("%s is not installed (%s) and STRATA_FULL_TESTS is set", tool, install)
		}
		t.Skipf("%s is not installed (%s)", tool, install)
	}
}
