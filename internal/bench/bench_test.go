package bench

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream/chunked"
)

// startBroker serves a broker on a fresh memory namespace and returns its
// address.
func startBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(context.Background(), broker.Config{Store: memory.New(memory.Config{Namespace: "bench-broker-" + runID()}), Advertise: ln.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() { _ = b.Close() })
	return ln.Addr().String()
}

// TestWorkloads runs every workload briefly on the memory driver (and a
// broker on it) and checks the shape of the result: the runs, the series
// each workload reports, and that operations were counted and timed.
func TestWorkloads(t *testing.T) {
	addr := startBroker(t)
	cases := []struct {
		workload string
		series   []string
		requests bool
	}{
		{WorkloadAppend, []string{"append"}, false},
		{WorkloadFetchTail, []string{"append", "read"}, false},
		{WorkloadFetchCatchup, []string{"read", "append"}, false},
		{WorkloadSharedLog, []string{"append"}, false},
		{WorkloadRaw, []string{"put"}, true},
		{WorkloadProduceConsume, []string{"produce", "e2e"}, false},
	}
	var results []Result
	for _, tc := range cases {
		t.Run(tc.workload, func(t *testing.T) {
			c := Config{Workload: tc.workload, Driver: "memory", BatchBytes: 4 << 10, Inflight: 4, Streams: 2,
				Duration: 150 * time.Millisecond, Warmup: 50 * time.Millisecond, Runs: 2,
				PrefillBytes: 256 << 10, CatchupAppends: true, Brokers: addr,
				RetainBytes: 64 << 10} // trims every few appends
			var tgt Target
			switch tc.workload {
			case WorkloadRaw:
				tgt.Storage = chunked.NewMemStorage()
			case WorkloadProduceConsume:
			default:
				store := memory.New(memory.Config{Namespace: "bench-" + runID()})
				t.Cleanup(func() { store.Close() })
				tgt.Store = store
			}
			var progress strings.Builder
			res, err := Execute(t.Context(), c, tgt, &progress)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Runs) != 2 {
				t.Fatalf("%d runs, want 2", len(res.Runs))
			}
			for i, r := range res.Runs {
				if r.Seconds <= 0 || len(r.Metrics) != len(tc.series) {
					t.Fatalf("run %d: %+v, want %d series", i, r, len(tc.series))
				}
				for j, m := range r.Metrics {
					if m.Name != tc.series[j] {
						t.Errorf("run %d series %d: %q, want %q", i, j, m.Name, tc.series[j])
					}
				}
			}
			if len(res.Median) != len(tc.series) {
				t.Fatalf("median has %d series, want %d", len(res.Median), len(tc.series))
			}
			// The first series always moves data in a run of 150 ms; its
			// latencies are ordered percentiles.
			m := res.Median[0]
			if m.Ops <= 0 || m.Bytes <= 0 || m.MBps <= 0 {
				t.Errorf("series %s counted nothing: %+v", m.Name, m)
			}
			if l := m.Latency; l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
				t.Errorf("series %s latency percentiles out of order: %+v", m.Name, l)
			}
			if (res.Requests != nil) != tc.requests {
				t.Errorf("requests = %+v, want counted: %v", res.Requests, tc.requests)
			}
			if tc.requests && res.Requests.PutsPerGiB <= 0 {
				t.Errorf("requests counted no puts: %+v", res.Requests)
			}
			if cl := res.Client; (cl != nil) != (tc.workload == WorkloadProduceConsume) {
				t.Errorf("client figures %+v for %s", cl, tc.workload)
			} else if cl != nil && (cl.ProducePerSec <= 0 || cl.ProduceBytes <= 4<<10 || cl.FetchPerSec <= 0 || cl.FetchBytes <= 0) {
				t.Errorf("client figures %+v: want produce requests above a record's size, and fetches", cl)
			}
			if !strings.Contains(progress.String(), "[run 2/2]") {
				t.Errorf("progress lacks the run lines: %q", progress.String())
			}
			results = append(results, res)
		})
	}
	if t.Failed() {
		return
	}
	var table strings.Builder
	if err := WriteTable(&table, results); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(table.String(), "\n"); got != 1+9 {
		t.Errorf("table has %d lines, want a header and 9 rows:\n%s", got, table.String())
	}
	dir := t.TempDir()
	if err := WriteCharts(dir, results); err != nil {
		t.Fatal(err)
	}
	checkPNGs(t, dir, Charts(results))
}

// checkPNGs fails t unless every file is a PNG in dir.
func checkPNGs(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
			t.Errorf("%s: not a PNG (%v)", f, err)
		}
	}
}

// TestMarkdownPairs checks that the side-by-side tables pair the right
// results: out-of-process with in-process, append with raw, catch-up with
// append alone.
func TestMarkdownPairs(t *testing.T) {
	metric := func(name string, mbps, p99 float64) Metric {
		return Metric{Name: name, MBps: mbps, Latency: Latency{P99: p99}}
	}
	base := Config{Driver: "nfs", BatchBytes: 1 << 20, Inflight: 4, Streams: 1, Duration: time.Second, Runs: 1}
	with := func(f func(*Config), ms ...Metric) Result {
		c := base
		f(&c)
		if err := c.Normalize(); err != nil {
			t.Fatal(err)
		}
		return Result{Config: c, Median: ms, Runs: []Run{{Seconds: 1, Metrics: ms}}}
	}
	rep := Report{Results: []Result{
		with(func(c *Config) { c.Workload = WorkloadAppend }, metric("append", 100, 10)),
		with(func(c *Config) { c.Workload = WorkloadAppend; c.OutOfProcess = true }, metric("append", 80, 12)),
		with(func(c *Config) { c.Workload = WorkloadRaw; c.Inflight = 1; c.Streams = 4 }, metric("put", 200, 5)),
		with(func(c *Config) {
			c.Workload = WorkloadFetchCatchup
			c.CatchupAppends = true
			c.PrefillBytes = 1 << 30
		}, metric("read", 300, 3), metric("append", 90, 13)),
		with(func(c *Config) {
			c.Workload = WorkloadProduceConsume
			c.Driver = ""
			c.Brokers = "k:9092"
			c.System = KafkaSystemPrefix
		}, metric("produce", 50, 20), metric("e2e", 50, 30)),
		with(func(c *Config) {
			c.Workload = WorkloadProduceConsume
			c.Driver = ""
			c.Brokers = "s:9092"
			c.System = "strata-serve nfs"
		}, metric("produce", 40, 10), metric("e2e", 40, 60)),
	}}
	var b strings.Builder
	WriteMarkdown(&b, rep, "bench")
	out := b.String()

	// One chart per comparison, each under its table, and the latency
	// distributions; no overview chart when there are pairs, and a stale
	// one from an earlier run is removed.
	dir := t.TempDir()
	stale := filepath.Join(dir, ThroughputChart)
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteCharts(dir, rep.Results); err != nil {
		t.Fatal(err)
	}
	wantCharts := []string{InVsOutChart, VsRawChart, VsKafkaChart, LatencyChart}
	if got := Charts(rep.Results); !slices.Equal(got, wantCharts) {
		t.Errorf("charts %v, want %v", got, wantCharts)
	}
	checkPNGs(t, dir, wantCharts)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s kept (%v)", ThroughputChart, err)
	}
	for _, f := range wantCharts {
		if !strings.Contains(out, "(bench/"+f+")") {
			t.Errorf("markdown does not show %s", f)
		}
	}
	if strings.Contains(out, ThroughputChart) {
		t.Errorf("markdown links %s although the report has pairs", ThroughputChart)
	}

	for _, want := range []string{
		"| 100.0 | 80.0 | 0.80 | 10.00 | 12.00 | +2.00 | met |",
		"| 200.0 | 100.0 | 0.50 | 5.00 | 10.00 | - | - | not met |",
		"| 1GiB | 300.0 | 100.0 | 90.0 | 10.00 | 13.00 | +30% | not met |",
		"| apache-kafka | 50.0 | 40.0 | 0.80 | 0.00 / 0.00 | 20.00 / 10.00 | 0.50 | 0.00 / 0.00 | 30.00 / 60.00 | 2.00 | not met |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

// TestReadProcIO: a process's own storage writes and CPU time grow with
// what it writes and computes.
func TestReadProcIO(t *testing.T) {
	before, err := readProcIO(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	after, err := readProcIO(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if w := after.writeBytes - before.writeBytes; w < 4<<20 {
		t.Errorf("write_bytes grew by %d after 4 MiB written and synced", w)
	}
	if after.cpu <= before.cpu {
		t.Errorf("cpu time %v, then %v after 50 ms of spinning", before.cpu, after.cpu)
	}
}
