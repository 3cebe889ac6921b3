// Package bench runs Strata's benchmark workloads (`strata bench`) and
// renders their results: append, fetch (tail and catch-up), sharedlog,
// raw (the backend's put-if-absent loop, the limit a driver can reach)
// and produce-consume (a Kafka client against a running broker).
//
// A workload runs for a warm-up and then for several counted runs of a
// fixed duration; each run reports throughput and latency percentiles
// (from HDR histograms) per series (appends, reads, puts, produces,
// end-to-end), and request counts per GiB when the store counts its
// requests. It is a tool, not a test harness: it asserts nothing about
// speed.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Workload names.
const (
	WorkloadAppend         = "append"
	WorkloadFetchTail      = "fetch-tail"
	WorkloadFetchCatchup   = "fetch-catchup"
	WorkloadSharedLog      = "sharedlog"
	WorkloadRaw            = "raw"
	WorkloadProduceConsume = "produce-consume"
)

// Workloads lists the workload names.
var Workloads = []string{WorkloadAppend, WorkloadFetchTail, WorkloadFetchCatchup, WorkloadSharedLog, WorkloadRaw, WorkloadProduceConsume}

// Config is one benchmark configuration.
type Config struct {
	// Workload is one of Workloads.
	Workload string `json:"workload"`
	// Driver names the driver (for the report only).
	Driver string `json:"driver"`
	// OutOfProcess says the driver runs as a plugin (for the report only).
	OutOfProcess bool `json:"out_of_process"`
	// BatchBytes is the payload of one append, put or Kafka record batch;
	// for produce-consume, the size of one record.
	BatchBytes int `json:"batch_bytes"`
	// Inflight is how many appends (puts per stream, for raw) each stream
	// keeps outstanding; for produce-consume the producer's buffered
	// records.
	Inflight int `json:"inflight"`
	// Streams is the number of streams (partitions, raw writers).
	Streams int `json:"streams"`
	// Linger is the group-commit wait given to the driver (or the Kafka
	// producer's linger); for the report, the caller applies it.
	Linger time.Duration `json:"linger_ns"`
	// Duration is the length of each counted run.
	Duration time.Duration `json:"duration_ns"`
	// Warmup runs before the counted runs, not counted.
	Warmup time.Duration `json:"warmup_ns"`
	// Runs is the number of counted runs.
	Runs int `json:"runs"`
	// PrefillBytes is what fetch-catchup writes to each stream before it
	// starts reading from the start.
	PrefillBytes int64 `json:"prefill_bytes,omitempty"`
	// RetainBytes bounds what append and fetch-tail keep in each stream:
	// once a stream holds more, it is trimmed to about half of it (so the
	// memory driver does not grow without bound and disks do not fill).
	// Default 256 MiB; the trims are part of the measured load.
	RetainBytes int64 `json:"retain_bytes,omitempty"`
	// CatchupAppends keeps appends going during fetch-catchup.
	CatchupAppends bool `json:"catchup_appends,omitempty"`
	// FetchBytes is the maxBytes of one fetch (default 1 MiB).
	FetchBytes int `json:"fetch_bytes"`
	// Brokers are the seed brokers of produce-consume (host:port, comma
	// separated).
	Brokers string `json:"brokers,omitempty"`
	// Rate paces the produce-consume producer at this many records per
	// second in all (0: as fast as the buffered records allow).
	Rate int `json:"rate,omitempty"`
	// ActivePartitions is how many partitions produce-consume produces to
	// (the first ones, round robin; 0: all of Streams).
	ActivePartitions int `json:"active_partitions,omitempty"`
	// NoConsume runs produce-consume without its consumer (the e2e series
	// stays empty).
	NoConsume bool `json:"no_consume,omitempty"`
	// MetricsURL is a broker's Prometheus endpoint (strata serve's
	// /metrics) whose strata_backend_requests_total are the runs' request
	// counts when the target does not count its own.
	MetricsURL string `json:"metrics_url,omitempty"`
	// MinIOMetricsURL is MinIO's own metrics endpoint
	// (/minio/metrics/v3/api/requests), read with a bearer token made from
	// MinIOAccessKey and MinIOSecretKey; its S3 request counts are the
	// runs' server-side counts.
	MinIOMetricsURL string `json:"minio_metrics_url,omitempty"`
	MinIOAccessKey  string `json:"-"`
	MinIOSecretKey  string `json:"-"`
	// DiskDir is a directory whose disk usage is measured once the runs
	// end (after Settle), against the record bytes the workload wrote.
	DiskDir string `json:"disk_dir,omitempty"`
	// KeepTopic leaves the produce-consume topic in place when done.
	KeepTopic bool `json:"keep_topic,omitempty"`
	// Settle is how long to wait after the runs before measuring DiskDir
	// (a store's background compaction).
	Settle time.Duration `json:"settle_ns,omitempty"`
	// BrokerPID is the broker's process, whose resident memory is read
	// before and after produce-consume creates its topic and at the end.
	BrokerPID int `json:"broker_pid,omitempty"`
	// System names what is measured in the label (default "workload
	// driver/in" or "/out"; "workload kafka" for produce-consume).
	System string `json:"system,omitempty"`
	// Label names the configuration in tables and charts (default: System
	// and the batch, in-flight, streams and linger figures).
	Label string `json:"label"`
}

// Target is what a workload runs against: a store (every workload but
// produce-consume) or a storage (raw).
type Target struct {
	// Store is the stream store of append, fetch and sharedlog.
	Store *stream.Store
	// Storage is the backend of raw.
	Storage chunked.Storage
}

// Report is the result of a `strata bench` invocation.
type Report struct {
	Meta    Meta     `json:"meta"`
	Results []Result `json:"results"`
}

// Meta describes where and when a report was made.
type Meta struct {
	Date      string `json:"date"`
	Host      string `json:"host"`
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	Load      string `json:"load"`
	GoVersion string `json:"go_version"`
	Strata    string `json:"strata_version"`
	Commit    string `json:"commit,omitempty"`
}

// Result is one configuration's runs and their medians.
type Result struct {
	Config Config `json:"config"`
	// Runs are the counted runs, in order.
	Runs []Run `json:"runs"`
	// Median has, per series, the median over the runs of each figure.
	Median []Metric `json:"median"`
	// Requests is the median over the runs of the requests per GiB and
	// per second (nil when the store does not count its requests).
	Requests *Requests `json:"requests,omitempty"`
	// Server is the median of the backend server's own request counts
	// (MinIOMetricsURL), nil without them.
	Server *Requests `json:"server_requests,omitempty"`
	// Disk is DiskDir's usage after the runs, nil without DiskDir.
	Disk *Disk `json:"disk,omitempty"`
	// Broker is the broker's resident memory and topic creation time
	// (produce-consume with BrokerPID), nil without.
	Broker *BrokerFigures `json:"broker,omitempty"`
	// Client is the bench client's own Kafka requests over the counted
	// runs (produce-consume), nil for other workloads.
	Client *ClientFigures `json:"client,omitempty"`
}

// Disk is a directory's usage against the record bytes written into it.
type Disk struct {
	// RecordBytes are the payload bytes the workload had acknowledged.
	RecordBytes int64 `json:"record_bytes"`
	// Before is the allocated bytes when the runs ended; After once
	// Settle passed.
	Before int64 `json:"before_bytes"`
	After  int64 `json:"after_bytes"`
	// Apparent is the sum of the file sizes after Settle.
	Apparent int64 `json:"apparent_bytes"`
	// Files counts the regular files after Settle.
	Files int64 `json:"files"`
	// Ratio is After / RecordBytes.
	Ratio float64 `json:"ratio"`
	// Kinds break After down by what the files belong to: "_wal", an nfs
	// base stream's last name component ("data.d", "meta.m"), or a file
	// extension.
	Kinds map[string]DiskKind `json:"kinds,omitempty"`
}

// DiskKind is the allocated bytes and the files of one kind of file.
type DiskKind struct {
	Bytes int64 `json:"bytes"`
	Files int64 `json:"files"`
}

// BrokerFigures are a broker's figures around produce-consume's topic.
type BrokerFigures struct {
	// CreateSeconds is how long creating the topic took, until every
	// partition had a leader.
	CreateSeconds float64 `json:"create_seconds"`
	// RSSBefore, RSSCreated and RSSEnd are the broker's resident bytes
	// before the topic was created, right after, and when the runs ended.
	RSSBefore  int64 `json:"rss_before_bytes"`
	RSSCreated int64 `json:"rss_created_bytes"`
	RSSEnd     int64 `json:"rss_end_bytes"`
	// PerPartition is (RSSCreated - RSSBefore) / partitions.
	PerPartition int64 `json:"rss_per_partition_bytes"`
	// WritesPerByte is what the broker wrote to storage over the counted
	// runs (/proc/PID/io write_bytes: bytes dirtied in the page cache or
	// written directly, fsynced or not) per record byte acknowledged.
	WritesPerByte float64 `json:"write_bytes_per_record_byte"`
	// CPUPerRecord is the broker's CPU time (user and system) over the
	// counted runs per record acknowledged, in microseconds.
	CPUPerRecord float64 `json:"cpu_us_per_record"`
}

// Run is one counted run.
type Run struct {
	Seconds  float64   `json:"seconds"`
	Metrics  []Metric  `json:"metrics"`
	Requests *Requests `json:"requests,omitempty"`
	Server   *Requests `json:"server_requests,omitempty"`
}

// Metric is one series of a run: an operation kind's counts, rates and
// latency percentiles.
type Metric struct {
	Name          string  `json:"name"`
	Ops           int64   `json:"ops"`
	Bytes         int64   `json:"bytes"`
	Records       int64   `json:"records"`
	MBps          float64 `json:"mb_per_s"`
	OpsPerSec     float64 `json:"ops_per_s"`
	RecordsPerSec float64 `json:"records_per_s"`
	Latency       Latency `json:"latency_ms"`
}

// Latency holds latency percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Requests are backend requests of a run and their rate per GiB moved.
type Requests struct {
	Puts, Gets, Heads, Lists, Deletes, Retries int64
	PutsPerGiB                                 float64 `json:"puts_per_gib"`
	GetsPerGiB                                 float64 `json:"gets_per_gib"`
	TotalPerGiB                                float64 `json:"requests_per_gib"`
	PutsPerSec                                 float64 `json:"puts_per_s"`
	GetsPerSec                                 float64 `json:"gets_per_s"`
}

// Normalize fills defaults and checks c, naming the bad field.
func (c *Config) Normalize() error {
	if !slices.Contains(Workloads, c.Workload) {
		return fmt.Errorf("workload %q: want one of %s", c.Workload, strings.Join(Workloads, ", "))
	}
	if c.BatchBytes <= 0 {
		return fmt.Errorf("batch size %d: must be positive", c.BatchBytes)
	}
	if c.Workload == WorkloadFetchTail && c.BatchBytes < 8 {
		return fmt.Errorf("batch size %d: fetch-tail needs at least 8 bytes (a send time)", c.BatchBytes)
	}
	if c.Workload == WorkloadProduceConsume && c.BatchBytes < 8 {
		return fmt.Errorf("batch size %d: produce-consume needs at least 8 bytes (a send time)", c.BatchBytes)
	}
	if c.Inflight <= 0 {
		return fmt.Errorf("inflight %d: must be positive", c.Inflight)
	}
	if c.Streams <= 0 {
		return fmt.Errorf("streams %d: must be positive", c.Streams)
	}
	if c.Duration <= 0 {
		return fmt.Errorf("duration %v: must be positive", c.Duration)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("warmup %v: must not be negative", c.Warmup)
	}
	if c.Runs <= 0 {
		return fmt.Errorf("runs %d: must be positive", c.Runs)
	}
	if c.RetainBytes <= 0 {
		c.RetainBytes = 256 << 20
	}
	if c.FetchBytes <= 0 {
		c.FetchBytes = 1 << 20
	}
	if c.Workload == WorkloadFetchCatchup && c.PrefillBytes <= 0 {
		return fmt.Errorf("prefill %d: fetch-catchup needs bytes to read", c.PrefillBytes)
	}
	if c.Workload == WorkloadProduceConsume && c.Brokers == "" {
		return errors.New("brokers: produce-consume needs a broker address")
	}
	if c.Rate < 0 {
		return fmt.Errorf("rate %d: must not be negative", c.Rate)
	}
	if c.ActivePartitions < 0 || c.ActivePartitions > c.Streams {
		return fmt.Errorf("active partitions %d: want 0 (all) to %d", c.ActivePartitions, c.Streams)
	}
	if (c.Rate > 0 || c.ActivePartitions > 0 || c.BrokerPID != 0 || c.NoConsume) && c.Workload != WorkloadProduceConsume {
		return fmt.Errorf("rate, active partitions, broker pid and no consumer: produce-consume only, not %s", c.Workload)
	}
	if c.Settle < 0 {
		return fmt.Errorf("settle %v: must not be negative", c.Settle)
	}
	if c.Label == "" {
		c.Label = c.defaultLabel()
	}
	return nil
}

func (c Config) defaultLabel() string {
	var b strings.Builder
	switch {
	case c.System != "":
		b.WriteString(c.System)
	case c.Workload == WorkloadProduceConsume:
		b.WriteString("produce-consume kafka")
	case c.OutOfProcess:
		fmt.Fprintf(&b, "%s %s/out", c.Workload, c.Driver)
	default:
		fmt.Fprintf(&b, "%s %s/in", c.Workload, c.Driver)
	}
	fmt.Fprintf(&b, " b=%s i=%d s=%d", SizeName(c.BatchBytes), c.Inflight, c.Streams)
	if c.ActivePartitions > 0 && c.ActivePartitions < c.Streams {
		fmt.Fprintf(&b, " active=%d", c.ActivePartitions)
	}
	if c.Rate > 0 {
		fmt.Fprintf(&b, " r=%d/s", c.Rate)
	}
	if c.NoConsume {
		b.WriteString(" no-consumer")
	}
	if c.Linger > 0 {
		fmt.Fprintf(&b, " l=%v", c.Linger)
	}
	return b.String()
}

// SizeName writes n bytes as 1KiB, 64KiB, 1MiB, 1GiB or a byte count.
func SizeName(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// workload is a prepared benchmark: run generates load, recording into m,
// until stop is closed, then waits for its outstanding operations and
// returns; cleanup releases what prepare made.
type workload struct {
	series  []string
	run     func(ctx context.Context, m *meter, stop <-chan struct{}) error
	cleanup func(ctx context.Context)
	// broker is what prepare measured of the broker (produce-consume with
	// a BrokerPID); run may fill in RSSEnd.
	broker *BrokerFigures
	// client counts the bench client's Kafka requests (produce-consume),
	// nil for other workloads.
	client *clientCounter
}

// Execute runs one configuration against t: prepare, warm-up, c.Runs
// counted runs of c.Duration, cleanup. It writes a progress line to
// progress (nil: none) about once a second.
func Execute(ctx context.Context, c Config, t Target, progress io.Writer) (Result, error) {
	if err := c.Normalize(); err != nil {
		return Result{}, err
	}
	w, err := prepare(ctx, c, t)
	if err != nil {
		return Result{}, fmt.Errorf("%s: prepare: %w", c.Label, err)
	}
	defer w.cleanup(context.WithoutCancel(ctx))
	stats := statsOf(ctx, t)
	if c.MetricsURL != "" && stats == nil {
		stats = promStats(ctx, c.MetricsURL, "", brokerRequestKind)
	}
	var server func() (chunked.RequestStats, bool)
	if c.MinIOMetricsURL != "" {
		token, err := minioToken(c.MinIOAccessKey, c.MinIOSecretKey)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", c.Label, err)
		}
		server = promStats(ctx, c.MinIOMetricsURL, token, minioRequestKind)
	}
	m := newMeter(w.series, stats, server)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- w.run(ctx, m, stop) }()

	res := Result{Config: c}
	var runErr error
	ran := false // errc has been received from
	wait := func(what string, d time.Duration) bool {
		deadline := time.Now().Add(d)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case <-timer.C:
				return true
			case <-tick.C:
				writeProgress(progress, c.Label, what, m.peek(), time.Until(deadline))
			case runErr = <-errc:
				ran = true
				if runErr == nil {
					runErr = errors.New("workload stopped early")
				}
				return false
			case <-ctx.Done():
				runErr = ctx.Err()
				return false
			}
		}
	}
	ok := true
	if c.Warmup > 0 {
		ok = wait("warm-up", c.Warmup)
	}
	m.swap()
	// The broker's writes and CPU over the counted runs: read as the
	// first begins and as the last ends.
	var io0, io1 procIO
	if c.BrokerPID != 0 {
		io0, _ = readProcIO(c.BrokerPID)
	}
	var cl0, cl1 clientCounts
	if w.client != nil {
		cl0 = w.client.snapshot()
	}
	for i := 0; ok && i < c.Runs; i++ {
		ok = wait(fmt.Sprintf("run %d/%d", i+1, c.Runs), c.Duration)
		if ok {
			r := m.swap()
			if c.BrokerPID != 0 {
				io1, _ = readProcIO(c.BrokerPID)
			}
			if w.client != nil {
				cl1 = w.client.snapshot()
			}
			res.Runs = append(res.Runs, r)
			writeRunLine(progress, c.Label, i+1, c.Runs, r)
		}
	}
	close(stop)
	if !ran {
		// Wait for the workload's outstanding operations before cleanup,
		// also when ctx ended the runs.
		if err := <-errc; runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		return res, fmt.Errorf("%s: %w", c.Label, runErr)
	}
	res.Median, res.Requests, res.Server = medians(res.Runs)
	if w.client != nil && len(res.Runs) > 0 {
		secs := 0.0
		for _, r := range res.Runs {
			secs += r.Seconds
		}
		res.Client = cl1.since(cl0, secs)
	}
	if c.BrokerPID != 0 && w.broker != nil {
		w.broker.RSSEnd, _ = rss(c.BrokerPID)
		if io0.ok && io1.ok {
			var bytes, records int64 // of the produce series, run by run
			for _, r := range res.Runs {
				bytes, records = bytes+r.Metrics[0].Bytes, records+r.Metrics[0].Records
			}
			if bytes > 0 {
				w.broker.WritesPerByte = float64(io1.writeBytes-io0.writeBytes) / float64(bytes)
			}
			if records > 0 {
				w.broker.CPUPerRecord = (io1.cpu - io0.cpu).Seconds() * 1e6 / float64(records)
			}
		}
		res.Broker = w.broker
	}
	if c.DiskDir != "" {
		d, err := settleDisk(ctx, c.DiskDir, m.totals[0].Load(), c.Settle, progress, c.Label)
		if err != nil {
			return res, fmt.Errorf("%s: disk usage: %w", c.Label, err)
		}
		res.Disk = d
	}
	return res, nil
}

// statsOf returns a reader of t's backend request counts, nil when t does
// not count them: a Storage that is a chunked.StatsReporter, or a Store
// whose driver is a stream.StatsReporter (in-process or across the plugin
// boundary) and answers a first call.
func statsOf(ctx context.Context, t Target) func() (chunked.RequestStats, bool) {
	if r, ok := t.Storage.(chunked.StatsReporter); ok {
		return func() (chunked.RequestStats, bool) { return r.RequestStats(), true }
	}
	r := t.Store
	if r == nil {
		return nil
	}
	if _, err := r.BackendStats(ctx); err != nil {
		return nil
	}
	return func() (chunked.RequestStats, bool) {
		v, err := r.BackendStats(context.WithoutCancel(ctx))
		return v, err == nil
	}
}

func writeProgress(w io.Writer, label, what string, r Run, left time.Duration) {
	if w == nil {
		return
	}
	var parts []string
	for _, m := range r.Metrics {
		parts = append(parts, fmt.Sprintf("%s %.1f MB/s %.0f op/s p99 %.2f ms", m.Name, m.MBps, m.OpsPerSec, m.Latency.P99))
	}
	fmt.Fprintf(w, "\r\033[K%s [%s, %ds left] %s", label, what, int(left.Seconds()+0.5), strings.Join(parts, " | "))
}

func writeRunLine(w io.Writer, label string, i, n int, r Run) {
	if w == nil {
		return
	}
	var parts []string
	for _, m := range r.Metrics {
		parts = append(parts, fmt.Sprintf("%s %.1f MB/s p50 %.2f p99 %.2f ms", m.Name, m.MBps, m.Latency.P50, m.Latency.P99))
	}
	fmt.Fprintf(w, "\r\033[K%s [run %d/%d] %s\n", label, i, n, strings.Join(parts, " | "))
}

// medians computes, per series, the median over runs of each figure, and
// the medians of the request rates (the target's and the server's).
func medians(runs []Run) ([]Metric, *Requests, *Requests) {
	if len(runs) == 0 {
		return nil, nil, nil
	}
	med := func(f func(Run) float64) float64 { return medianBy(runs, f) }
	out := make([]Metric, len(runs[0].Metrics))
	for i := range out {
		at := func(f func(Metric) float64) float64 { return med(func(r Run) float64 { return f(r.Metrics[i]) }) }
		out[i] = Metric{
			Name:          runs[0].Metrics[i].Name,
			Ops:           int64(at(func(m Metric) float64 { return float64(m.Ops) })),
			Bytes:         int64(at(func(m Metric) float64 { return float64(m.Bytes) })),
			Records:       int64(at(func(m Metric) float64 { return float64(m.Records) })),
			MBps:          at(func(m Metric) float64 { return m.MBps }),
			OpsPerSec:     at(func(m Metric) float64 { return m.OpsPerSec }),
			RecordsPerSec: at(func(m Metric) float64 { return m.RecordsPerSec }),
			Latency: Latency{
				P50:  at(func(m Metric) float64 { return m.Latency.P50 }),
				P90:  at(func(m Metric) float64 { return m.Latency.P90 }),
				P99:  at(func(m Metric) float64 { return m.Latency.P99 }),
				P999: at(func(m Metric) float64 { return m.Latency.P999 }),
				Max:  at(func(m Metric) float64 { return m.Latency.Max }),
			},
		}
	}
	reqs := func(of func(Run) *Requests) *Requests {
		if of(runs[0]) == nil {
			return nil
		}
		rq := func(f func(*Requests) float64) float64 { return med(func(r Run) float64 { return f(of(r)) }) }
		return &Requests{
			PutsPerGiB:  rq(func(r *Requests) float64 { return r.PutsPerGiB }),
			GetsPerGiB:  rq(func(r *Requests) float64 { return r.GetsPerGiB }),
			TotalPerGiB: rq(func(r *Requests) float64 { return r.TotalPerGiB }),
			PutsPerSec:  rq(func(r *Requests) float64 { return r.PutsPerSec }),
			GetsPerSec:  rq(func(r *Requests) float64 { return r.GetsPerSec }),
		}
	}
	return out, reqs(func(r Run) *Requests { return r.Requests }), reqs(func(r Run) *Requests { return r.Server })
}

// medianBy is the Median of f over xs.
func medianBy[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return Median(v)
}

// Median returns the median of v (the mean of the middle two for an even
// count; 0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// CollectMeta describes this machine and the current time for a report.
func CollectMeta(strataVersion, commit string) Meta {
	m := Meta{
		Date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		CPUs:      runtime.NumCPU(),
		GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Strata:    strataVersion,
		Commit:    commit,
	}
	m.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	return m
}
