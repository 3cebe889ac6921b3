package bench

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/drivers/nfs"
)

// TestParseRequests reads request counts out of Prometheus text as
// strata serve and MinIO write it, summing drivers and servers.
func TestParseRequests(t *testing.T) {
	broker := `# HELP strata_backend_requests_total Requests ...
# TYPE strata_backend_requests_total counter
strata_backend_requests_total{driver="nfs",op="put"} 120
strata_backend_requests_total{driver="nfs",op="get"} 30
strata_backend_requests_total{driver="s3",op="put"} 5
strata_backend_requests_total{driver="s3",op="delete"} 2
strata_backend_bytes_total{driver="nfs",direction="written"} 99999
`
	st, err := parseRequests(strings.NewReader(broker), brokerRequestKind)
	if err != nil || st.Puts != 125 || st.Gets != 30 || st.Deletes != 2 || st.Heads != 0 {
		t.Fatalf("broker metrics: %+v, %v; want 125 puts, 30 gets, 2 deletes", st, err)
	}
	minio := `minio_s3_requests_total{api="putobject",server="127.0.0.1:9000"} 1.5e+03
minio_s3_requests_total{api="getobject",server="127.0.0.1:9000"} 40
minio_s3_requests_total{api="headobject",server="127.0.0.1:9000"} 7
minio_s3_requests_total{api="listobjectsv2",server="127.0.0.1:9000"} 3
minio_s3_requests_total{api="deletemultipleobjects",server="127.0.0.1:9000"} 1
minio_s3_requests_total{api="putobject",server="127.0.0.1:9001"} 10
minio_s3_requests_inflight_total{api="putobject",server="127.0.0.1:9000"} 4
minio_s3_requests_total{api="weird \"quoted\" api",server="x"} 1
`
	st, err = parseRequests(strings.NewReader(minio), minioRequestKind)
	if err != nil || st.Puts != 1510 || st.Gets != 40 || st.Heads != 7 || st.Lists != 3 || st.Deletes != 1 {
		t.Fatalf("MinIO v2 metrics: %+v, %v", st, err)
	}
	v3 := `minio_api_requests_total{name="PutObject",server="127.0.0.1:9000",type="s3"} 46915
minio_api_requests_total{name="PutBucket",server="127.0.0.1:9000",type="s3"} 2
minio_api_requests_total{name="GetObject",server="127.0.0.1:9000",type="s3"} 12
minio_api_requests_total{name="HeadObject",server="127.0.0.1:9000",type="s3"} 5
minio_api_requests_total{name="PutObject",server="127.0.0.1:9000",type="admin"} 99
minio_api_requests_errors_total{name="PutBucket",server="127.0.0.1:9000",type="s3"} 1
`
	st, err = parseRequests(strings.NewReader(v3), minioRequestKind)
	if err != nil || st.Puts != 46917 || st.Gets != 12 || st.Heads != 5 {
		t.Fatalf("MinIO v3 metrics: %+v, %v", st, err)
	}
	if _, _, _, ok := parseSample(`bad{api="x} 1`); ok {
		t.Error("a sample with an unterminated label value parsed")
	}
}

// TestProduceConsumePacedWithBackendFigures runs produce-consume paced,
// on a few of the partitions, against a broker on the nfs driver whose
// /metrics the run reads, and checks the figures it adds: request rates
// from the broker's counters, the data directory's usage against the
// records written, the broker's RSS (this process) and the pacing.
func TestProduceConsumePacedWithBackendFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker on the nfs driver for a few seconds")
	}
	dir := t.TempDir()
	store, err := nfs.Open(t.Context(), []byte("root: "+dir+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(context.Background(), broker.Config{Store: store, Driver: "nfs", Advertise: ln.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.Serve(ln) }()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(hln) }()
	t.Cleanup(func() { srv.Close(); b.Close(); store.Close() })

	const rate = 400
	c := Config{Workload: WorkloadProduceConsume, BatchBytes: 1 << 10, Inflight: 256, Streams: 8, ActivePartitions: 2, Rate: rate,
		Duration: time.Second, Warmup: 200 * time.Millisecond, Runs: 2, Brokers: ln.Addr().String(),
		MetricsURL: "http://" + hln.Addr().String() + "/metrics", DiskDir: dir, Settle: 100 * time.Millisecond, BrokerPID: os.Getpid()}
	res, err := Execute(t.Context(), c, Target{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Config.Label, "active=2 r=400/s") {
		t.Errorf("label %q lacks the active partitions and the rate", res.Config.Label)
	}
	for i, r := range res.Runs {
		// The pacer never runs ahead of its rate (it may fall behind).
		if got := float64(r.Metrics[0].Records) / r.Seconds; got > 1.5*rate {
			t.Errorf("run %d: %.0f records/s acknowledged, paced at %d", i, got, rate)
		}
		if r.Requests == nil || r.Requests.Puts <= 0 || r.Requests.PutsPerSec <= 0 {
			t.Errorf("run %d: no backend puts from the broker's /metrics: %+v", i, r.Requests)
		}
	}
	if res.Requests == nil || res.Requests.PutsPerSec <= 0 {
		t.Errorf("median requests %+v", res.Requests)
	}
	d := res.Disk
	if d == nil || d.RecordBytes < int64(c.Runs)*rate/4*1024 || d.After <= 0 || d.Files <= 0 || d.Ratio != float64(d.After)/float64(d.RecordBytes) {
		t.Errorf("disk %+v", d)
	}
	if k := d.Kinds; k == nil || k["data/c"].Files == 0 || k["meta/c"].Files == 0 {
		t.Errorf("disk by kind %+v, want the partitions' data and meta streams", k)
	}
	if bf := res.Broker; bf == nil || bf.RSSBefore <= 0 || bf.RSSEnd <= 0 || bf.CreateSeconds <= 0 {
		t.Errorf("broker figures %+v", bf)
	}
	if cl := res.Client; cl == nil || cl.ProducePerSec <= 0 || cl.ProduceBytes <= 1<<10 || cl.FetchPerSec <= 0 || cl.FetchBytes <= 0 {
		t.Errorf("client figures %+v", cl)
	}
	var table strings.Builder
	WriteMarkdown(&table, Report{Results: []Result{res}}, "x")
	if !strings.Contains(table.String(), "### Backend requests, disk and memory") {
		t.Errorf("markdown lacks the backend table:\n%s", table.String())
	}
}

// TestFileKind names the files of an nfs data directory and of Kafka's.
func TestFileKind(t *testing.T) {
	for path, want := range map[string]string{
		"objects/c@/t@/ab@/38@/data.m.stream@/Y2MT@/c@/00000000000000000001":            "data.m/c",
		"objects/c@/t@/ab@/38@/data.d.stream@/g@/00000000000000000000":                  "data.d/g",
		"objects/c@/t@/ab@/38@/data.0123456789abcdef.d.stream@/g@/00000000000000000000": "data.d/g",
		"objects/c@/t@/ab@/38@/data.0123456789abcdeg.d.stream@/hint":                    "data.0123456789abcdeg.d/hint",
		"objects/c@/t@/ab@/38@/meta.m.stream@/Y2MT@/hint":                               "meta.m/hint",
		"objects/c@/_wal@/0f3e-1.stream@/Y2MT@/c@/00000000000000000007":                 "_wal/c",
		"strata-bench-x-7/00000000000000000000.log":                                     ".log",
		"meta.properties": ".properties",
		"README":          "other",
	} {
		if got := fileKind(path); got != want {
			t.Errorf("fileKind(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestCombine merges the rounds of a configuration into one result with
// the medians over all their runs, keeping the order of first appearance.
func TestCombine(t *testing.T) {
	run := func(p50 float64, puts float64) Run {
		return Run{Seconds: 1, Metrics: []Metric{{Name: "produce", Latency: Latency{P50: p50}}}, Requests: &Requests{PutsPerSec: puts}}
	}
	res := func(label string, ratio float64, runs ...Run) Result {
		return Result{Config: Config{Label: label, Runs: len(runs)}, Runs: runs, Disk: &Disk{Ratio: ratio},
			Client: &ClientFigures{ProducePerSec: ratio * 10, ProduceBytes: ratio, FetchPerSec: ratio * 100, FetchBytes: -ratio}}
	}
	out := Combine([]Result{
		res("a", 3, run(10, 100)), res("b", 1, run(1, 1)), res("a", 1, run(30, 300)), res("a", 2, run(20, 200), run(40, 400)),
	})
	if len(out) != 2 || out[0].Config.Label != "a" || out[1].Config.Label != "b" {
		t.Fatalf("combined %+v", out)
	}
	a := out[0]
	if len(a.Runs) != 4 || a.Config.Runs != 4 || a.Median[0].Latency.P50 != 25 || a.Requests.PutsPerSec != 250 || a.Disk.Ratio != 2 {
		t.Fatalf("a: %d runs, p50 %v, puts/s %v, disk %v", len(a.Runs), a.Median[0].Latency.P50, a.Requests.PutsPerSec, a.Disk.Ratio)
	}
	if c := a.Client; c == nil || *c != (ClientFigures{ProducePerSec: 20, ProduceBytes: 2, FetchPerSec: 200, FetchBytes: -2}) {
		t.Fatalf("a: client figures %+v, want the median of each", c)
	}
}

// TestProduceWithoutConsumer runs the producer alone: produces are
// counted, nothing is consumed.
func TestProduceWithoutConsumer(t *testing.T) {
	c := Config{Workload: WorkloadProduceConsume, BatchBytes: 64, Inflight: 64, Streams: 2, NoConsume: true,
		Duration: 200 * time.Millisecond, Runs: 1, Brokers: startBroker(t)}
	res, err := Execute(t.Context(), c, Target{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, e := res.Median[0], res.Median[1]; p.Ops <= 0 || e.Ops != 0 || !strings.HasSuffix(res.Config.Label, "no-consumer") {
		t.Fatalf("produce %+v, e2e %+v, label %q: want produces only", p, e, res.Config.Label)
	}
	if cl := res.Client; cl == nil || cl.ProducePerSec <= 0 || cl.FetchPerSec != 0 || cl.FetchBytes != 0 {
		t.Fatalf("client figures %+v: want produce requests and no fetches", cl)
	}
}

// TestClientCounter counts Produce requests written and Fetch responses
// read, and nothing else or failed.
func TestClientCounter(t *testing.T) {
	var c clientCounter
	var meta kgo.BrokerMetadata
	c.OnBrokerWrite(meta, kmsg.Produce.Int16(), 1000, 0, 0, nil)
	c.OnBrokerWrite(meta, kmsg.Produce.Int16(), 3000, 0, 0, nil)
	c.OnBrokerWrite(meta, kmsg.Produce.Int16(), 5000, 0, 0, errors.New("broken pipe"))
	c.OnBrokerWrite(meta, kmsg.Fetch.Int16(), 70, 0, 0, nil)
	c.OnBrokerRead(meta, kmsg.Fetch.Int16(), 9000, 0, 0, nil)
	c.OnBrokerRead(meta, kmsg.Produce.Int16(), 50, 0, 0, nil)
	c.OnBrokerRead(meta, kmsg.Metadata.Int16(), 500, 0, 0, nil)
	got := c.snapshot().since(clientCounts{}, 2)
	if want := (ClientFigures{ProducePerSec: 1, ProduceBytes: 2000, FetchPerSec: 0.5, FetchBytes: 9000}); *got != want {
		t.Fatalf("figures %+v, want %+v", *got, want)
	}
	if got := c.snapshot().since(c.snapshot(), 1); *got != (ClientFigures{}) {
		t.Fatalf("nothing between equal snapshots: %+v", *got)
	}
}
