package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream/wal"
)

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveProc is a `strata serve` child process. One goroutine waits for
// it; wait returns what that Wait returned (exec.Cmd.Wait may be called
// only once).
type serveProc struct {
	cmd     *exec.Cmd
	stderr  *syncBuffer
	done    chan struct{}
	waitErr error
}

// wait waits for the process to exit and returns its Wait error.
func (p *serveProc) wait() error {
	<-p.done
	return p.waitErr
}

func startServe(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	return startServeCmd(t, exec.Command(bin, append([]string{"serve"}, args...)...))
}

// startServeCmd starts cmd, a `strata serve` command line, and waits until
// it listens.
func startServeCmd(t testing.TB, cmd *exec.Cmd) *serveProc {
	t.Helper()
	p, err := tryStartServeCmd(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// errPortTaken: strata serve could not bind a port a test picked (another
// process took it between freePort and the bind).
var errPortTaken = errors.New("a port was taken")

// tryStartServeCmd is startServeCmd returning its failure.
func tryStartServeCmd(t testing.TB, cmd *exec.Cmd) (*serveProc, error) {
	t.Helper()
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if dir := os.Getenv("STRATA_TEST_SERVE_LOGS"); dir != "" {
		// Every strata serve's log, kept (for a benchmark or a failure
		// to look into): DIR/serve-<start time>-<port>.log.
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("serve-%s-%s.log", time.Now().Format("150405.000"), portArg(cmd.Args)))); err == nil {
			cmd.Stderr = io.MultiWriter(errb, f)
			t.Cleanup(func() { _ = f.Close() })
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serveProc{cmd: cmd, stderr: errb, done: make(chan struct{})}
	go func() { p.waitErr = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = p.wait() })
	line := make(chan string, 1)
	go func() {
		b := make([]byte, 4096)
		n, _ := stdout.Read(b)
		line <- string(b[:n])
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, "Kafka listener") {
			_ = cmd.Process.Kill() // (it has most likely exited)
			_ = p.wait()           // its output is all in errb now
			if strings.Contains(errb.String(), "address already in use") {
				return nil, fmt.Errorf("%w: strata serve did not start: %q\n%s", errPortTaken, l, errb.String())
			}
			return nil, fmt.Errorf("strata serve did not start: %q\n%s", l, errb.String())
		}
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("strata serve did not start in 60s\n%s", errb.String())
	}
	return p, nil
}

// TestServeFailoverKill9 kills a broker process with SIGKILL under a running
// idempotent kgo producer, starts another on the same storage and port, and
// checks that the producer resumes and every acked record is consumed
// exactly once, in order per partition.
func TestServeFailoverKill9(t *testing.T) { serveFailoverKill9(t, "", "") }

// TestServeFailoverKill9WALFilesSwitch is the same over three brokers, the
// second with stream_sets.wal_files off: each finds the WALs the one it
// follows left where it left them (<data>/wal, then the nfs store).
func TestServeFailoverKill9WALFilesSwitch(t *testing.T) {
	serveFailoverKill9(t, "", "stream_sets: {wal_files: false}\n", "")
}

// serveFailoverKill9 runs a broker with each config in turn (YAML; empty:
// none) on one --data, each killed with SIGKILL under the producer but
// the last.
func serveFailoverKill9(t *testing.T, configs ...string) {
	dir := t.TempDir()
	bin := buildBinary(t, dir, "strata", ".")
	data := filepath.Join(dir, "data")
	addr := freePort(t)
	start := func(i int) *serveProc {
		args := []string{"--data", data, "--listen", addr}
		if configs[i] != "" {
			cfg := filepath.Join(dir, fmt.Sprintf("broker-%d.yaml", i))
			if err := os.WriteFile(cfg, []byte(configs[i]), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--config", cfg)
		}
		return startServe(t, bin, args...)
	}
	p := start(0)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryTimeout(2*time.Minute), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "failover", 3, -1
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, resp)
	}

	pr := startProducer(ctx, cl, "failover", 7)
	pr.wait(t, 3000)
	for i := 1; i < len(configs); i++ {
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.wait()
		before := pr.n()
		t.Logf("killed broker %d (SIGKILL) with %d records acked", i, before)
		time.Sleep(300 * time.Millisecond)
		p = start(i)
		pr.wait(t, before+3000)
	}
	acked := pr.finish(ctx, t, cl)
	t.Logf("producer resumed: %d records acked in all", len(acked))
	consumeAcked(ctx, t, addr, "failover", acked)
}

// ackedProducer produces records rec-NNNNNNN (keys i mod k) to a topic
// until finish, keeping which were acked on which partition.
type ackedProducer struct {
	mu     sync.Mutex
	acked  map[string]int32 // value -> partition
	failed []error
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startProducer(ctx context.Context, cl *kgo.Client, topic string, keys int) *ackedProducer {
	p := &ackedProducer{acked: map[string]int32{}, stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			v := fmt.Sprintf("rec-%07d", i)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % keys)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.failed = append(p.failed, err)
					return
				}
				p.acked[string(r.Value)] = r.Partition
			})
			if i%50 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	return p
}

// n is how many records were acked.
func (p *ackedProducer) n() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// wait waits until k records were acked.
func (p *ackedProducer) wait(t testing.TB, k int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for p.n() < k {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acked, waiting for %d", p.n(), k)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finish stops producing, flushes and returns the acked records; any
// failed produce fails the test.
func (p *ackedProducer) finish(ctx context.Context, t testing.TB, cl *kgo.Client) map[string]int32 {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failed) > 0 {
		t.Fatalf("%d produces failed, first: %v", len(p.failed), p.failed[0])
	}
	return p.acked
}

// consumeAcked reads topic from the start through the broker at addr and
// checks that every acked record is there exactly once, on its partition,
// in order per partition.
func consumeAcked(ctx context.Context, t testing.TB, addr, topic string, acked map[string]int32) {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	last := map[int32]string{}
	lastOffset := map[int32]int64{}
	var fetchErrs []string
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(seen) < len(acked) {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consumed %d distinct records of %d acked\n%s", len(seen), len(acked),
				missingReport(acked, seen, last, lastOffset, fetchErrs))
		}
		fs.EachError(func(topic string, p int32, err error) {
			if len(fetchErrs) < 20 && !errors.Is(err, context.DeadlineExceeded) {
				fetchErrs = append(fetchErrs, fmt.Sprintf("%s/%d: %v", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v] {
				t.Fatalf("record %s consumed twice (duplicate append)", v)
			}
			seen[v] = true
			if l, ok := last[r.Partition]; ok && v <= l {
				t.Fatalf("partition %d: %s after %s", r.Partition, v, l)
			}
			last[r.Partition] = v
			lastOffset[r.Partition] = r.Offset
			if p, ok := acked[v]; ok && p != r.Partition {
				t.Fatalf("record %s acked on partition %d, consumed from %d", v, p, r.Partition)
			}
		})
	}
	for v := range acked {
		if !seen[v] {
			t.Fatalf("acked record %s lost", v)
		}
	}
}

// missingReport says, per partition, which acked records a consumer
// did not see: before its last consumed record (a hole in the log) or
// after it (a partition it could not read on), with the fetch errors.
func missingReport(acked map[string]int32, seen map[string]bool, last map[int32]string, lastOffset map[int32]int64, fetchErrs []string) string {
	type miss struct {
		n, holes      int
		first, latest string
	}
	per := map[int32]*miss{}
	for v, p := range acked {
		if seen[v] {
			continue
		}
		m := per[p]
		if m == nil {
			m = &miss{first: v, latest: v}
			per[p] = m
		}
		m.n++
		if v < last[p] {
			m.holes++
		}
		m.first, m.latest = min(m.first, v), max(m.latest, v)
	}
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(per)) {
		m := per[p]
		fmt.Fprintf(&b, "partition %d: %d acked records missing (%s..%s), %d of them before the last consumed record %s at offset %d\n",
			p, m.n, m.first, m.latest, m.holes, last[p], lastOffset[p])
	}
	for _, e := range fetchErrs {
		fmt.Fprintf(&b, "fetch error: %s\n", e)
	}
	return b.String()
}

// TestServeStartupErrors: bad configs stop startup with a clear error.
func TestServeStartupErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notExec := write("not-a-driver", "#!/bin/sh\nexit 1\n")
	cases := []struct {
		name, config string
		code         int
		want         string
	}{
		{"top-level tls", "tls: {cert: x}\ndrivers: [{driver: memory}]\n", 2, "TLS is set per listener"},
		{"sasl unknown field", "sasl: {mechanism: PLAIN}\ndrivers: [{driver: memory}]\n", 2, "field mechanism not found"},
		{"sasl bad credential", "sasl: {users: [{name: a, credentials: [\"SCRAM-SHA-256:1:x:y:z\"]}]}\ndrivers: [{driver: memory}]\n", 2, "sasl.users[0].credentials[0]"},
		{"sasl listener without users", "listeners: [{listen: \"127.0.0.1:0\", security_protocol: SASL_PLAINTEXT}]\ndrivers: [{driver: memory}]\n", 2, "needs sasl.users"},
		{"ssl listener without tls", "listeners: [{listen: \"127.0.0.1:0\", security_protocol: SSL}]\ndrivers: [{driver: memory}]\n", 2, "listeners[0].tls: required"},
		{"bad security protocol", "listeners: [{listen: \"127.0.0.1:0\", security_protocol: SASL}]\ndrivers: [{driver: memory}]\n", 2, "listeners[0].security_protocol"},
		{"tls files missing", "listeners: [{listen: \"127.0.0.1:0\", security_protocol: SSL, tls: {cert_file: /nonexistent.crt, key_file: /nonexistent.key}}]\ndrivers: [{driver: memory, allow_non_durable: true}]\n", 2, "listeners[0]: broker: listener SSL-0: tls"},
		{"bad super user", "acls: {enabled: true, super_users: [admin]}\ndrivers: [{driver: memory}]\n", 2, "acls.super_users[0]"},
		{"unknown field", "drivers: [{driver: memory}]\nbogus: 1\n", 2, "field bogus not found"},
		{"routes without drivers", "cluster: x\ntopics: [{prefix: a, driver: x}]\n", 2, "topics and default_driver need drivers"},
		{"unknown builtin", "drivers: [{driver: ceph}]\n", 2, `"ceph" is not a built-in driver`},
		{"bad route", "drivers: [{driver: memory}]\ntopics: [{prefix: a, driver: nope}]\n", 2, `topics[0].driver: "nope"`},
		{"bad sha256 length", "drivers: [{driver: memory, sha256: abc}]\n", 2, "want 64 hex digits"},
		{"not durable", "drivers: [{driver: memory}]\n", 1, "is not durable"},
		{"sha256 mismatch", "drivers: [{driver: memory, sha256: " + strings.Repeat("0", 64) + "}]\n", 1, "drivers[0] memory"},
		{"binary not executable", "drivers: [{name: x, binary: " + notExec + "}]\n", 1, "not an executable file"},
		{"nfs root missing", "drivers: [{driver: nfs, config: {root: " + filepath.Join(dir, "missing") + "}}]\n", 1, "drivers[0] nfs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o, e bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code := runServe(ctx, []string{"--config", write(strings.ReplaceAll(c.name, " ", "_")+".yaml", c.config), "--listen", "127.0.0.1:0"}, &o, &e)
			if code != c.code || !strings.Contains(e.String(), c.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", code, c.code, e.String(), c.want)
			}
		})
	}
}

// TestServeConfigPluginDriverAndMetrics starts the broker with a config that
// loads the memory driver as a built-in plugin binary (allowed non-durable)
// and the nfs driver for topics "d*", produces through both and reads
// /metrics (including the nfs store's backend request counts, which cross
// the plugin boundary), /healthz and /readyz.
func TestServeConfigPluginDriverAndMetrics(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "serve.yaml")
	httpAddr := freePort(t)
	if err := os.Mkdir(filepath.Join(dir, "nfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "cluster: metrics-test\nhttp: " + httpAddr + "\ndefault_driver: mem\ndrivers:\n  - name: mem\n    driver: memory\n    allow_non_durable: true\n" +
		"  - name: disk\n    driver: nfs\n    config:\n      root: " + filepath.Join(dir, "nfs") + "\ntopics:\n  - prefix: d\n    driver: disk\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done, e := runServeInProcess(t, ctx, cfgPath, addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"m", "d"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	cl.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, "metrics-test") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		`strata_broker_requests_total{api="Produce",error="NONE"} 2`,
		`strata_broker_append_duration_seconds_count{driver="mem"} 1`,
		`strata_broker_append_duration_seconds_count{driver="disk"} 1`,
		`strata_broker_ready 1`,
		`strata_backend_requests_total{driver="disk",op="put"} `,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// The nfs store counted at least one put (the record's chunk) and its
	// bytes; the memory store has no backend and no such series.
	m := regexp.MustCompile(`strata_backend_requests_total\{driver="disk",op="put"\} (\d+)`).FindStringSubmatch(body)
	if n, _ := strconv.Atoi(m[1]); n < 1 {
		t.Fatalf("nfs store counted %d puts after an acked produce:\n%s", n, body)
	}
	if strings.Contains(body, `strata_backend_requests_total{driver="mem"`) {
		t.Fatalf("the memory store has backend request series:\n%s", body)
	}
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("serve exit %d:\n%s", c, e.String())
	}
}

// runServeInProcess runs `strata serve --config cfgPath --listen addr` in
// this process until ctx ends, and waits until it listens.
func runServeInProcess(t *testing.T, ctx context.Context, cfgPath, addr string) (<-chan int, *syncBuffer) {
	t.Helper()
	done := make(chan int, 1)
	var o, e syncBuffer
	go func() { done <- runServe(ctx, []string{"--config", cfgPath, "--listen", addr}, &o, &e) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(o.String(), "Kafka listener") {
		select {
		case c := <-done:
			t.Fatalf("serve exited %d before listening:\n%s", c, e.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", e.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return done, &e
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeRoutesTopicsToDrivers loads two nfs drivers as built-in plugins
// and routes a topic prefix to the second: its partitions land there, the
// catalog and the other topics on the default.
func TestServeRoutesTopicsToDrivers(t *testing.T) {
	dir := t.TempDir()
	hot, cold := filepath.Join(dir, "hot"), filepath.Join(dir, "cold")
	cfg := fmt.Sprintf(`drivers:
  - name: hot
    driver: nfs
    config: {root: %s, create_root: true}
  - name: cold
    driver: nfs
    config: {root: %s, create_root: true}
default_driver: hot
topics:
  - prefix: archive-
    driver: cold
`, hot, cold)
	cfgPath := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done, e := runServeInProcess(t, ctx, cfgPath, addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"archive-2025", "live"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(topic)}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	cl.Close()
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("serve exit %d:\n%s", c, e.String())
	}
	// List the streams each root holds through the nfs driver, as the
	// broker sees them (stream sets on, its default).
	list := func(root, prefix string) []string {
		base, err := nfs.Open(context.Background(), fmt.Appendf(nil, "root: %s\n", root))
		if err != nil {
			t.Fatal(err)
		}
		st, err := wal.NewStore(base, wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		names, err := st.List(context.Background(), prefix)
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	// Each topic has one partition: a data and a meta stream.
	if h, c := list(hot, "strata/t/"), list(cold, "strata/t/"); len(h) != 2 || len(c) != 2 {
		t.Fatalf("partition streams: %v on hot, %v on cold; want one partition each", h, c)
	}
	if c := list(cold, "strata/__"); len(c) != 0 {
		t.Fatalf("cluster streams on the cold driver: %v", c)
	}
	if h := list(hot, "strata/__topics"); len(h) != 1 {
		t.Fatalf("catalog on the hot driver: %v", h)
	}
}

// TestServeOnMinIO runs the broker on the s3 driver (a built-in plugin)
// against the MinIO testbed and round-trips records through kgo.
func TestServeOnMinIO(t *testing.T) {
	testbed.SkipShort(t, "the minio testbed")
	env, err := testbed.Env("minio", "STRATA_S3_CONFIG")
	if err != nil {
		t.Fatalf("MinIO testbed: %v", err)
	}
	raw, err := os.ReadFile(env["STRATA_S3_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	var s3cfg map[string]any
	if err := yaml.Unmarshal(raw, &s3cfg); err != nil {
		t.Fatal(err)
	}
	s3cfg["prefix"] = "test/serve-" + rand.Text()[:10] + "/"
	cfg, err := yaml.Marshal(map[string]any{"drivers": []any{map[string]any{"driver": "s3", "config": s3cfg}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done, e := runServeInProcess(t, ctx, cfgPath, addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("on-minio"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "on-minio", Value: []byte(fmt.Sprintf("m-%04d", i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	var got []string
	for len(got) < n && pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := fmt.Sprintf("m-%04d", i); v != want {
			t.Fatalf("record %d is %q, want %q", i, v, want)
		}
	}
	if len(got) != n {
		t.Fatalf("consumed %d of %d", len(got), n)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"on-minio"}
	if _, err := del.RequestWith(ctx, cl); err != nil {
		t.Logf("cleanup: DeleteTopics: %v", err)
	}
	cl.Close()
	cancel()
	if c := <-done; c != 0 {
		t.Fatalf("serve exit %d:\n%s", c, e.String())
	}
}

// TestServeExitsWhenTakenOver: a broker process that another broker took
// over (same storage and cluster) exits with status 3 and says so, instead
// of running on with no partitions and a Metadata answer that names only
// itself, with no leader.
func TestServeExitsWhenTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the strata binary: not in -short")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir, "strata", ".")
	data := filepath.Join(dir, "data")
	old := startServe(t, bin, "--data", data, "--listen", freePort(t))
	startServe(t, bin, "--data", data, "--listen", freePort(t))
	exited := make(chan error, 1)
	go func() { exited <- old.wait() }()
	select {
	case err := <-exited:
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		want := "strata serve: another broker (epoch 2) took over cluster strata; this broker (epoch 1) no longer owns its partitions; exiting"
		if code != 3 || !strings.Contains(old.stderr.String(), want) {
			t.Fatalf("the taken-over broker exited with %v (status %d), want status 3 and %q on stderr:\n%s", err, code, want, old.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the taken-over broker still runs 30s after the takeover:\n%s", old.stderr.String())
	}
}

// portArg is the port of the --listen argument in args ("" if none).
func portArg(args []string) string {
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			_, port, _ := strings.Cut(args[i+1], ":")
			return port
		}
	}
	return ""
}

// TestBrokerProcs: strata serve runs with twice the CPUs' Ps unless the
// GOMAXPROCS variable says otherwise.
func TestBrokerProcs(t *testing.T) {
	for _, c := range []struct {
		set        bool
		cpus, want int
	}{{false, 1, 2}, {false, 2, 4}, {false, 16, 32}, {false, 0, 2}, {true, 2, 0}} {
		if got := brokerProcs(c.set, c.cpus); got != c.want {
			t.Errorf("brokerProcs(%v, %d) = %d, want %d", c.set, c.cpus, got, c.want)
		}
	}
}
