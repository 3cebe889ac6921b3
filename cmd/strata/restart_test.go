//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// driverProcesses are the pids of this process's children that serve the
// built-in driver name (`driver-process NAME`).
func driverProcesses(t *testing.T, name string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(driverProcessCommand + "\x00" + name + "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestServeRestartsKilledDriver: SIGKILL of the driver process under a
// running kgo producer. The broker turns unready (/readyz 503,
// strata_driver_up 0), restarts the driver after its restart_delay, turns
// ready again with strata_driver_restarts_total 1, the producer's records
// are acked again, and every acked record is consumed.
func TestServeRestartsKilledDriver(t *testing.T) {
	dir := t.TempDir()
	httpAddr, addr := freePort(t), freePort(t)
	cfgPath := filepath.Join(dir, "serve.yaml")
	cfg := fmt.Sprintf("cluster: restart-test\nhttp: %s\ndrivers:\n  - name: disk\n    driver: nfs\n    restart_delay: 3s\n    config:\n      root: %s\n      create_root: true\n",
		httpAddr, filepath.Join(dir, "nfs"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, serveLog := runServeInProcess(t, ctx, cfgPath, addr)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s\n%s", what, limit, serveLog.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz before the kill: %d %q", code, body)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryTimeout(2*time.Minute), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(ctx, t, cl, "restart", 2)
	pr := startProducer(ctx, cl, "restart", 5)
	pr.wait(t, 500)

	pids := driverProcesses(t, "nfs")
	if len(pids) != 1 {
		t.Fatalf("want one nfs driver process, found %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	before := pr.n()
	t.Logf("killed driver process %d (SIGKILL) with %d records acked", pids[0], before)
	waitFor("/readyz 503 after the kill", 10*time.Second, func() bool { c, _ := get("/readyz"); return c == http.StatusServiceUnavailable })
	_, body := get("/readyz")
	_, metrics := get("/metrics")
	if !strings.Contains(body, "disk") || !strings.Contains(metrics, `strata_driver_up{driver="disk"} 0`) || !strings.Contains(metrics, "strata_broker_ready 0") {
		t.Fatalf("driver down: /readyz %q; /metrics:\n%s", body, metrics)
	}
	waitFor("/readyz 200 after the restart", time.Minute, func() bool { c, _ := get("/readyz"); return c == 200 })
	_, metrics = get("/metrics")
	for _, want := range []string{`strata_driver_up{driver="disk"} 1`, `strata_driver_restarts_total{driver="disk"} 1`, "strata_broker_ready 1"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("after the restart /metrics lacks %q:\n%s", want, metrics)
		}
	}
	if now := driverProcesses(t, "nfs"); len(now) != 1 || now[0] == pids[0] {
		t.Fatalf("driver processes after the restart: %v (killed %d)", now, pids[0])
	}
	pr.wait(t, before+500)
	// The cluster's own streams (catalog, group offsets) live on the
	// restarted driver too.
	createTopic(ctx, t, cl, "after-restart", 1)
	commitOffset(ctx, t, cl, "g-after-restart", "restart", 0, 7)
	acked := pr.finish(ctx, t, cl)
	t.Logf("%d records acked in all (%d after the kill)", len(acked), len(acked)-before)
	consumeAcked(ctx, t, addr, "restart", acked)
	cl.Close()
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("serve exit %d:\n%s", c, serveLog.String())
	}
}

// commitOffset commits offset for a group's partition (a simple,
// memberless commit) and checks that it was accepted.
func commitOffset(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetCommit %s: %v", group, err)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("OffsetCommit %s: error %d", group, c)
	}
}
