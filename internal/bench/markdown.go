package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteMarkdown writes rep as a Markdown section body: the machine, a
// table (medians of the runs) of the results no comparison shows, the
// latency chart, and the side-by-side ratios that can be paired within the
// report, each with its chart: out-of-process vs in-process, append vs the
// raw backend loop, strata serve vs Apache Kafka, and append latency with
// and without a catch-up reader. chartDir is the charts' path relative to
// the page.
func WriteMarkdown(w io.Writer, rep Report, chartDir string) {
	m := rep.Meta
	charts := Charts(rep.Results)
	chart := func(file, alt string) {
		if contains(charts, file) {
			fmt.Fprintf(w, "![%s](%s/%s)\n\n", alt, chartDir, file)
		}
	}
	fmt.Fprintf(w, "Machine: %d CPUs (%s); %s; strata %s", m.CPUs, m.CPU, m.GoVersion, m.Strata)
	if m.Commit != "" {
		fmt.Fprintf(w, " (commit %s)", m.Commit)
	}
	fmt.Fprint(w, ".\n\n")
	fmt.Fprint(w, "Medians over the runs. Latency: one operation, submit to ack (`read`: one fetch; `fetch-tail` and `e2e`: "+
		"from the append or produce call to a reader seeing it). req/GiB: backend requests per GiB (drivers that count them).\n\n")

	// Results that a comparison below shows are left out of this table
	// (all of them are in docs/bench/report.json and the latency chart).
	shown := pairedLabels(rep.Results)
	var others []Result
	for _, r := range rep.Results {
		if !shown[r.Config.Label] {
			others = append(others, r)
		}
	}
	if len(others) > 0 {
		if len(shown) > 0 {
			fmt.Fprint(w, "Configurations not in a comparison below:\n\n")
		}
		fmt.Fprint(w, "| configuration | series | MB/s | MB/s min-max | p50 ms | p99 ms | p99.9 ms | req/GiB |\n")
		fmt.Fprint(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	}
	for _, r := range others {
		for i, x := range r.Median {
			lo, hi := spread(r.Runs, i)
			req, _ := requestCells(r)
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f-%.1f | %.2f | %.2f | %.2f | %s |\n",
				r.Config.Label, x.Name, x.MBps, lo, hi, x.Latency.P50, x.Latency.P99, x.Latency.P999, req)
		}
	}
	fmt.Fprintln(w)
	chart(ThroughputChart, "throughput")
	chart(LatencyChart, "latency distributions per driver")

	if rows := outVsIn(rep.Results); len(rows) > 0 {
		fmt.Fprint(w, "### Out-of-process vs in-process\n\n")
		fmt.Fprint(w, "| configuration | in MB/s | out MB/s | out / in | in p99 ms | out p99 ms | added p99 ms | target out / in >= 0.80 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range rows {
			a, b := p.a.Median[0], p.b.Median[0]
			r := ratio(b.MBps, a.MBps)
			target := met(r >= 0.8)
			if p.b.Config.Driver == "memory" {
				target = "n/a (memory: vs a bare gRPC stream, see Plugin transport)"
			}
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f | %.2f | %.2f | %+.2f | %s |\n", p.b.Config.Label, a.MBps, b.MBps, r, a.Latency.P99, b.Latency.P99, b.Latency.P99-a.Latency.P99, target)
		}
		fmt.Fprintln(w)
		chart(InVsOutChart, "out-of-process vs in-process")
	}
	if rows := vsRaw(rep.Results); len(rows) > 0 {
		fmt.Fprint(w, "### Driver vs the raw backend loop\n\n")
		fmt.Fprint(w, "The raw loop is put-if-absent of fresh keys of the same payload size with as many writers as the append run has appends in flight (streams × inflight): the least a durable write of that payload costs on the backend.\n\n")
		fmt.Fprint(w, "| append configuration | raw MB/s | append MB/s | append / raw | raw p99 ms | append p99 ms | raw req/GiB | append req/GiB | target >= 0.80 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range rows {
			a, b := p.a.Median[0], p.b.Median[0]
			r := ratio(b.MBps, a.MBps)
			rawReq, _ := requestCells(p.a)
			req, _ := requestCells(p.b)
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f | %.2f | %.2f | %s | %s | %s |\n", p.b.Config.Label, a.MBps, b.MBps, r, a.Latency.P99, b.Latency.P99, rawReq, req, met(r >= 0.8))
		}
		fmt.Fprintln(w)
		chart(VsRawChart, "driver vs the raw backend loop")
	}
	if rows := vsKafka(rep.Results); len(rows) > 0 {
		fmt.Fprint(w, "### strata serve vs Apache Kafka\n\n")
		fmt.Fprint(w, "The same kgo producer and consumer, record size, acks=all, partitions, buffered records and linger against each broker on this machine, in this run. Ratios are strata / Kafka (throughput: higher is better; latency: lower is better).\n\n")
		fmt.Fprint(w, "| strata configuration | Kafka | Kafka MB/s | strata MB/s | throughput ratio | produce p50 ms (Kafka / strata) | produce p99 ms (Kafka / strata) | p99 ratio | e2e p50 ms (Kafka / strata) | e2e p99 ms (Kafka / strata) | e2e p99 ratio | target: throughput >= 1.0, produce p99 <= 1.0 |\n")
		fmt.Fprint(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range rows {
			kp, sp := p.a.Median[0], p.b.Median[0]
			ke, se := p.a.Median[1], p.b.Median[1]
			tr, pr := ratio(sp.MBps, kp.MBps), ratio(sp.Latency.P99, kp.Latency.P99)
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f | %s |\n",
				p.b.Config.Label, p.a.Config.System, kp.MBps, sp.MBps, tr,
				kp.Latency.P50, sp.Latency.P50, kp.Latency.P99, sp.Latency.P99, pr,
				ke.Latency.P50, se.Latency.P50, ke.Latency.P99, se.Latency.P99, ratio(se.Latency.P99, ke.Latency.P99), met(tr >= 1 && pr <= 1))
		}
		fmt.Fprintln(w)
		chart(VsKafkaChart, "strata serve vs Apache Kafka")
	}
	writeBackendTable(w, rep.Results)
	if rows := catchup(rep.Results); len(rows) > 0 {
		fmt.Fprint(w, "### Catch-up reads while appends continue\n\n")
		fmt.Fprint(w, "A reader reads the prefilled stream from its start (again from the start when it reaches the end) while the same stream keeps taking appends; compared with the same appends alone.\n\n")
		fmt.Fprint(w, "| catch-up configuration | prefill | read MB/s | append MB/s alone | append MB/s with reads | append p99 alone ms | append p99 with reads ms | p99 change | target <= +20% |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range rows {
			alone := p.a.Median[0]
			read, with := p.b.Median[0], p.b.Median[1]
			change := ratio(with.Latency.P99, alone.Latency.P99) - 1
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %+.0f%% | %s |\n", p.b.Config.Label, SizeName(int(p.b.Config.PrefillBytes)),
				read.MBps, alone.MBps, with.MBps, alone.Latency.P99, with.Latency.P99, 100*change, met(change <= 0.2))
		}
		fmt.Fprintln(w)
	}
}

// pairedLabels are the labels of the results some comparison table of
// WriteMarkdown shows.
func pairedLabels(results []Result) map[string]bool {
	out := map[string]bool{}
	for _, ps := range [][]pair{outVsIn(results), vsRaw(results), vsKafka(results), catchup(results)} {
		for _, p := range ps {
			out[p.a.Config.Label], out[p.b.Config.Label] = true, true
		}
	}
	return out
}

// writeBackendTable writes the produce-consume results that carry
// backend request rates, disk usage or broker figures (bench/streamsets).
func writeBackendTable(w io.Writer, results []Result) {
	var rows []Result
	for _, r := range results {
		if r.Config.Workload == WorkloadProduceConsume && len(r.Median) > 0 && (r.Requests != nil || r.Server != nil || r.Disk != nil || r.Broker != nil) {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	cell := func(ok bool, format string, a ...any) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf(format, a...)
	}
	fmt.Fprint(w, "### Backend requests, disk and memory\n\n")
	fmt.Fprint(w, "Backend requests per second from the broker's own /metrics (strata_backend_requests_total) and, on s3, from MinIO's own counters; "+
		"disk is the data directory's allocated bytes after the runs (and the settle time) over the record bytes acknowledged; "+
		"RSS is the broker's resident memory before the topic was created and when the runs ended; "+
		"writes / records is what the broker process wrote to storage over the counted runs (/proc/PID/io write_bytes, fsynced or not) over the record bytes acknowledged, and CPU its user and system time per record.\n\n")
	fmt.Fprint(w, "| configuration | runs | records/s | produce p50 ms | produce p99 ms | puts/s | gets/s | MinIO PUT/s | MinIO GET/s | disk / records | writes / records | CPU µs / record | topic create s | RSS before / end MiB |\n")
	fmt.Fprint(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		m, q, s, d, b := r.Median[0], r.Requests, r.Server, r.Disk, r.Broker
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Config.Label, len(r.Runs), m.RecordsPerSec,
			m.Latency.P50, m.Latency.P99,
			cell(q != nil, "%.1f", q.rate(true)), cell(q != nil, "%.1f", q.rate(false)),
			cell(s != nil, "%.1f", s.rate(true)), cell(s != nil, "%.1f", s.rate(false)),
			cell(d != nil, "%.2f", d.ratio()),
			cell(b != nil && b.WritesPerByte > 0, "%.2f", b.writes()), cell(b != nil && b.CPUPerRecord > 0, "%.1f", b.cpu()),
			cell(b != nil, "%.1f", b.create()),
			cell(b != nil, "%d / %d", b.rssMiB(false), b.rssMiB(true)))
	}
	fmt.Fprintln(w)
}

// rate is q's puts (or gets) per second; 0 for nil.
func (q *Requests) rate(puts bool) float64 {
	switch {
	case q == nil:
		return 0
	case puts:
		return q.PutsPerSec
	}
	return q.GetsPerSec
}

func (d *Disk) ratio() float64 {
	if d == nil {
		return 0
	}
	return d.Ratio
}

func (b *BrokerFigures) create() float64 {
	if b == nil {
		return 0
	}
	return b.CreateSeconds
}

func (b *BrokerFigures) writes() float64 {
	if b == nil {
		return 0
	}
	return b.WritesPerByte
}

func (b *BrokerFigures) cpu() float64 {
	if b == nil {
		return 0
	}
	return b.CPUPerRecord
}

func (b *BrokerFigures) rssMiB(end bool) int64 {
	switch {
	case b == nil:
		return 0
	case end:
		return b.RSSEnd >> 20
	}
	return b.RSSBefore >> 20
}

// met renders whether a target was met in this run.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// pair is a baseline a and a result b compared with it.
type pair struct{ a, b Result }

// shape is what must match for two results to be compared: everything but
// the label, the field compared, and the run counts.
func shape(c Config) string {
	return fmt.Sprintf("%s|%s|%v|%d|%d|%d|%d|%d|%d", c.Workload, c.Driver, c.OutOfProcess, c.BatchBytes, c.Inflight, c.Streams, c.Linger, c.Rate, c.ActivePartitions)
}

func find(results []Result, want string, key func(Config) string) (Result, bool) {
	for _, r := range results {
		if len(r.Median) > 0 && key(r.Config) == want {
			return r, true
		}
	}
	return Result{}, false
}

// outVsIn pairs each out-of-process result with the in-process result of
// the same shape.
func outVsIn(results []Result) []pair {
	var out []pair
	for _, r := range results {
		if !r.Config.OutOfProcess || len(r.Median) == 0 || r.Config.Workload == WorkloadProduceConsume {
			continue
		}
		c := r.Config
		c.OutOfProcess = false
		if a, ok := find(results, shape(c), shape); ok {
			out = append(out, pair{a, r})
		}
	}
	return out
}

// vsRaw pairs each in-process append result with the raw result of the
// same driver and batch size whose writers equal its appends in flight.
func vsRaw(results []Result) []pair {
	var out []pair
	for _, r := range results {
		c := r.Config
		if c.Workload != WorkloadAppend || c.OutOfProcess || len(r.Median) == 0 {
			continue
		}
		for _, raw := range results {
			rc := raw.Config
			if rc.Workload == WorkloadRaw && rc.Driver == c.Driver && rc.BatchBytes == c.BatchBytes &&
				rc.Streams*rc.Inflight == c.Streams*c.Inflight && len(raw.Median) > 0 {
				out = append(out, pair{raw, r})
				break
			}
		}
	}
	return out
}

// catchup pairs each fetch-catchup result that kept appending with the
// append result of the same shape.
func catchup(results []Result) []pair {
	var out []pair
	for _, r := range results {
		c := r.Config
		if c.Workload != WorkloadFetchCatchup || !c.CatchupAppends || len(r.Median) < 2 {
			continue
		}
		c.Workload = WorkloadAppend
		if a, ok := find(results, shape(c), shape); ok {
			out = append(out, pair{a, r})
		}
	}
	return out
}

// KafkaSystemPrefix starts the System of produce-consume results measured
// against Apache Kafka; the other produce-consume results of the same
// shape are compared with them.
const KafkaSystemPrefix = "apache-kafka"

// vsKafka pairs each produce-consume result against Apache Kafka with the
// other produce-consume results of the same shape.
func vsKafka(results []Result) []pair {
	var out []pair
	for _, k := range results {
		if k.Config.Workload != WorkloadProduceConsume || !strings.HasPrefix(k.Config.System, KafkaSystemPrefix) || len(k.Median) < 2 {
			continue
		}
		for _, r := range results {
			if r.Config.Workload == WorkloadProduceConsume && !strings.HasPrefix(r.Config.System, KafkaSystemPrefix) &&
				len(r.Median) >= 2 && shape(r.Config) == shape(k.Config) {
				out = append(out, pair{k, r})
			}
		}
	}
	return out
}

// Merge concatenates reports, keeping the first one's Meta.
func Merge(reps []Report) Report {
	var out Report
	for i, r := range reps {
		if i == 0 {
			out.Meta = r.Meta
		}
		out.Results = append(out.Results, r.Results...)
	}
	return out
}

// Combine merges the results of equal labels into one result each (in
// the order of their first appearance): their runs, in order, and the
// medians over all of them. A benchmark run that repeats each
// configuration once per round, interleaved, reports its medians so. Of
// the disk and broker figures it keeps those of the median result (by
// disk ratio, by creation time).
func Combine(results []Result) []Result {
	var order []string
	by := map[string][]Result{}
	for _, r := range results {
		if _, ok := by[r.Config.Label]; !ok {
			order = append(order, r.Config.Label)
		}
		by[r.Config.Label] = append(by[r.Config.Label], r)
	}
	out := make([]Result, 0, len(order))
	for _, label := range order {
		rs := by[label]
		c := Result{Config: rs[0].Config}
		var disks []*Disk
		var brokers []*BrokerFigures
		var clients []*ClientFigures
		for _, r := range rs {
			c.Runs = append(c.Runs, r.Runs...)
			if r.Disk != nil {
				disks = append(disks, r.Disk)
			}
			if r.Broker != nil {
				brokers = append(brokers, r.Broker)
			}
			if r.Client != nil {
				clients = append(clients, r.Client)
			}
		}
		c.Config.Runs = len(c.Runs)
		c.Median, c.Requests, c.Server = medians(c.Runs)
		if len(disks) > 0 {
			slices.SortFunc(disks, func(a, b *Disk) int { return cmp.Compare(a.Ratio, b.Ratio) })
			c.Disk = disks[len(disks)/2]
		}
		if len(brokers) > 0 {
			slices.SortFunc(brokers, func(a, b *BrokerFigures) int { return cmp.Compare(a.CreateSeconds, b.CreateSeconds) })
			c.Broker = brokers[len(brokers)/2]
		}
		c.Client = medianClient(clients)
		out = append(out, c)
	}
	return out
}
