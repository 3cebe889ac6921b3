package main

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// serveArgsInProcess runs `strata serve args...` in this process until ctx
// ends; it returns the exit code channel and stderr once the broker
// listens, or the exit code if it exits first.
func serveArgsInProcess(t *testing.T, ctx context.Context, args ...string) (<-chan int, *syncBuffer, bool) {
	t.Helper()
	done := make(chan int, 1)
	var o, e syncBuffer
	go func() { done <- runServe(ctx, args, &o, &e) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(o.String(), "Kafka listener") {
		select {
		case c := <-done:
			done <- c
			return done, &e, false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", e.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return done, &e, true
}

// produceOne produces one record to addr within 15s.
func produceOne(addr, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
}

// TestServeHTTPBindFailureKeepsCluster: a second `strata serve` on the
// same data whose --http port is busy exits 2 before taking the cluster:
// the running broker is not fenced and keeps serving.
func TestServeHTTPBindFailureKeepsCluster(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freePort(t)
	done1, e1, ok := serveArgsInProcess(t, ctx, "--data", data, "--listen", addr)
	if !ok {
		t.Fatalf("first broker exited %d:\n%s", <-done1, e1.String())
	}
	if err := produceOne(addr, "before"); err != nil {
		t.Fatalf("producing to the first broker: %v", err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	done2, e2, ok := serveArgsInProcess(t, ctx, "--data", data, "--listen", freePort(t), "--http", busy.Addr().String())
	if ok {
		t.Fatalf("second broker started although its --http port %s is busy:\n%s", busy.Addr(), e2.String())
	}
	if code := <-done2; code != 2 || !strings.Contains(e2.String(), "--http") {
		t.Fatalf("second broker: exit %d, want 2 naming --http:\n%s", code, e2.String())
	}
	// The first broker checks for a newer epoch every 2s.
	time.Sleep(3 * time.Second)
	if err := produceOne(addr, "after"); err != nil {
		t.Fatalf("producing to the first broker after the second failed to start: %v\n%s", err, e1.String())
	}
	if strings.Contains(e1.String(), "broker fenced") {
		t.Fatalf("the first broker was fenced by one that never served:\n%s", e1.String())
	}
	cancel()
	if c := <-done1; c != 0 {
		t.Fatalf("first broker exit %d:\n%s", c, e1.String())
	}
}

// TestServeSurvivesFDExhaustion: `strata serve` under a 300 file
// descriptor limit, hit by 400 connections, keeps running (Accept backs
// off) and serves produce and fetch once they close.
func TestServeSurvivesFDExhaustion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strata binary and runs it under prlimit")
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatalf("prlimit (util-linux) is required: %v", err)
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir, "strata", ".")
	addr := freePort(t)
	p := startServeCmd(t, exec.Command("prlimit", "--nofile=300:300", bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", addr))
	exited := make(chan error, 1)
	go func() { exited <- p.wait() }()
	if err := produceOne(addr, "fd"); err != nil {
		t.Fatalf("produce before: %v", err)
	}
	var conns []net.Conn
	for range 400 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			break // the backlog is full: enough
		}
		conns = append(conns, c)
	}
	t.Logf("%d connections open", len(conns))
	select {
	case err := <-exited:
		t.Fatalf("strata serve exited (%v) with %d connections open:\n%s", err, len(conns), p.stderr.String())
	case <-time.After(3 * time.Second):
	}
	for _, c := range conns {
		_ = c.Close()
	}
	var err error
	for range 10 {
		if err = produceOne(addr, "fd"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("produce after the connections closed: %v\n%s", err, p.stderr.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("fd"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for n < 2 && ctx.Err() == nil {
		n += cl.PollFetches(ctx).NumRecords()
	}
	if n < 2 {
		t.Fatalf("consumed %d of the 2 records produced", n)
	}
	select {
	case err := <-exited:
		t.Fatalf("strata serve exited: %v\n%s", err, p.stderr.String())
	default:
	}
}

// TestServeConfigLimits: the connection, fetch and partition limits are
// read from the config file (durations as Go durations).
func TestServeConfigLimits(t *testing.T) {
	c, err := parseServeConfig([]byte(`
drivers: [{driver: memory, allow_non_durable: true}]
max_connections_per_ip: 7
idle_timeout: 90s
request_timeout: 5s
fetch_max_bytes: 1048576
fetch_memory_bytes: 8388608
max_partitions_per_topic: 64
max_partitions: 512
`))
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.MaxConnectionsPerIP, c.IdleTimeout, c.RequestTimeout, c.FetchMaxBytes, c.FetchMemoryBytes, c.MaxPartitionsPerTopic, c.MaxPartitions}
	want := []any{7, 90 * time.Second, 5 * time.Second, 1 << 20, 8 << 20, int32(64), 512}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("field %d: got %v, want %v", i, got[i], want[i])
		}
	}
}
