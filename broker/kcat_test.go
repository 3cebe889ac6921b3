package broker

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// kcat runs Debian's kcat (librdkafka) against the broker.
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestKcat produces with kcat, reads back with kcat as a plain consumer and
// as a group member (-G), and lists metadata (-L).
func TestKcat(t *testing.T) {
	requireTool(t, "kcat", "apt-get install -y kcat")
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, func(c *Config) { c.DefaultPartitions = 3 })
	const n = 1000
	var in strings.Builder
	var want []string
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "k%d:value-%06d\n", i, i)
		want = append(want, fmt.Sprintf("k%d=value-%06d", i, i))
	}
	kcat(t, in.String(), "-P", "-b", addr, "-t", "kc", "-K:", "-X", "enable.idempotence=true")

	meta := kcat(t, "", "-L", "-b", addr, "-t", "kc")
	if !strings.Contains(meta, `topic "kc" with 3 partitions`) {
		t.Fatalf("kcat -L:\n%s", meta)
	}
	check := func(what, out string) {
		t.Helper()
		got := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(got)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Fatalf("%s: got %d lines, want %d (first %q)", what, len(got), len(w), got[0])
		}
	}
	check("kcat -C", kcat(t, "", "-C", "-b", addr, "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n"))
	// Per partition the offsets must come in order.
	po := kcat(t, "", "-C", "-b", addr, "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%p %o\n")
	last := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(po), "\n") {
		var p string
		var o int
		fmt.Sscanf(line, "%s %d", &p, &o)
		if l, ok := last[p]; ok && o != l+1 {
			t.Fatalf("partition %s: offset %d after %d", p, o, l)
		}
		last[p] = o
	}
	check("kcat -G", kcat(t, "", "-b", addr, "-G", "kcat-group", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%k=%s\n", "kc"))
}
