package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/azure"
	"github.com/stratastream/strata/drivers/hdfs"
	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/drivers/s3"
	"github.com/stratastream/strata/internal/bench"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
	"github.com/stratastream/strata/stream/plugin"
)

const benchUsage = `Usage: strata bench [flags]
       strata bench report [--combine] [--table] [--out DIR] [--md FILE] [--chart-path PATH] REPORT.json...

Runs benchmark workloads against a driver, in-process (built-in drivers
linked into this binary) or out-of-process (the driver's plugin binary), or
against a running Kafka-protocol broker:

  append           pipelined appends to --streams streams, --inflight deep
  fetch-tail       appends plus a reader following each stream's tail (e2e latency)
  fetch-catchup    reads --prefill bytes per stream from the start, again and
                   again, while appends continue (--catchup-appends)
  sharedlog        SharedLog appends of Kafka batches of 1 KiB records
  raw              the backend's own loop: put-if-absent of fresh keys,
                   streams x inflight writers (in-process chunked drivers)
  produce-consume  a kgo producer (acks=all, idempotent) and consumer against
                   --brokers, round robin over the partitions (--streams;
                   --active-partitions: only the first N), paced with --rate

--workload, --batch, --inflight, --streams, --linger and --process take
comma-separated lists; every combination is one configuration. Each runs a
warm-up, then --runs counted runs of --duration. A progress line goes to
stderr; a table of medians to stdout (to stderr with --json, which prints
one JSON report on stdout); --out DIR writes report.json and PNG charts:
one per comparison the results allow (in-vs-out.png, vs-raw.png,
vs-kafka.png; throughput.png when there is none) and latency.png, the
latency distributions per driver. Built-in drivers without --config: memory on a fresh
namespace, nfs on a fresh temp directory, others from $STRATA_<DRIVER>_CONFIG
(as testbed/up prints). --linger sets the driver's engine linger (the
producer's linger for produce-consume).

Backend requests per second and per GiB come from the store's own counts
(in-process drivers), or from a broker's --metrics, and from MinIO's own
counters with --minio-metrics. --disk DIR measures DIR's allocated bytes
once the runs end (again after --settle) against the record bytes
acknowledged; --broker-pid PID reports the broker's RSS before and after
the topic is created, the creation time, and over the counted runs its
writes to storage per record byte and CPU time per record.

'strata bench report' merges JSON reports into one, writes the charts to
--out and a Markdown section (tables, ratios) to --md or stdout.

Exit status: 0 done, 1 a workload failed, 2 bad input.

Flags:
`

// runBench implements `strata bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return runBenchReport(args[1:], stdout, stderr)
	}
	fs := newFlagSet("strata bench", benchUsage, stderr)
	var (
		workloads  = fs.String("workload", bench.WorkloadAppend, "workloads: "+strings.Join(bench.Workloads, ", "))
		driver     = fs.String("driver", "memory", "built-in driver name or path of a driver plugin binary")
		configPath = fs.String("config", "", "driver config file (YAML or JSON)")
		process    = fs.String("process", "in", "where the driver runs: in, out (or in,out for both)")
		outOfProc  = fs.Bool("out-of-process", false, "shorthand for --process out")
		batches    = fs.String("batch", "64KiB", "payload bytes per append (per record for produce-consume), e.g. 1KiB,1MiB")
		inflights  = fs.String("inflight", "16", "appends in flight per stream (producer buffered records for produce-consume)")
		streams    = fs.String("streams", "1", "streams (partitions, raw writers per in-flight slot)")
		lingers    = fs.String("linger", "0s", "group-commit linger given to the driver (or producer)")
		duration   = fs.Duration("duration", 10*time.Second, "length of one counted run")
		warmup     = fs.Duration("warmup", 2*time.Second, "warm-up before the counted runs")
		runs       = fs.Int("runs", 3, "counted runs per configuration")
		prefill    = fs.String("prefill", "256MiB", "bytes written to each stream before fetch-catchup reads")
		retain     = fs.String("retain", "256MiB", "append and fetch-tail trim each stream to keep about half of this once it holds more")
		catchupApp = fs.Bool("catchup-appends", true, "keep appending during fetch-catchup")
		fetchBytes = fs.String("fetch-bytes", "1MiB", "maxBytes of one fetch")
		brokers    = fs.String("brokers", "", "seed brokers for produce-consume (host:port,...)")
		rate       = fs.Int("rate", 0, "produce-consume: records per second in all (default 0: as fast as the buffer allows)")
		active     = fs.Int("active-partitions", 0, "produce-consume: produce to only the first N partitions (default all)")
		metricsURL = fs.String("metrics", "", "a strata serve /metrics URL: backend request counts from its strata_backend_requests_total")
		minioURL   = fs.String("minio-metrics", "", "MinIO's metrics URL, /minio/metrics/v3/api/requests (v2's cached /minio/v2/metrics/cluster works too): server-side S3 request counts (token from $STRATA_MINIO_ACCESS_KEY and $STRATA_MINIO_SECRET_KEY)")
		diskDir    = fs.String("disk", "", "directory whose disk usage is measured after the runs, against the record bytes written")
		settle     = fs.Duration("settle", 0, "wait this long after the runs before measuring --disk (background compaction)")
		keepTopic  = fs.Bool("keep-topic", false, "produce-consume: leave the topic when done (to measure the data directory after the broker stops)")
		brokerPID  = fs.Int("broker-pid", 0, "produce-consume: the broker's pid, for its resident memory around topic creation, its writes and CPU time")
		consume    = fs.Bool("consume", true, "produce-consume: run the consumer (false: the producer alone)")
		system     = fs.String("system", "", "name of the system under test in labels (default: workload and driver)")
		jsonOut    = fs.Bool("json", false, "print one JSON report on stdout")
		outDir     = fs.String("out", "", "directory for report.json and PNG charts")
	)
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *outOfProc {
		*process = "out"
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata bench: "+format+"\n", a...)
		return 2
	}
	sizes, err := parseList(*batches, parseSize)
	if err != nil {
		return bad("--batch: %v", err)
	}
	infl, err := parseList(*inflights, strconv.Atoi)
	if err != nil {
		return bad("--inflight: %v", err)
	}
	strs, err := parseList(*streams, strconv.Atoi)
	if err != nil {
		return bad("--streams: %v", err)
	}
	lings, err := parseList(*lingers, time.ParseDuration)
	if err != nil {
		return bad("--linger: %v", err)
	}
	procs, err := parseList(*process, func(s string) (bool, error) {
		switch s {
		case "in":
			return false, nil
		case "out":
			return true, nil
		}
		return false, fmt.Errorf("%q: want in or out", s)
	})
	if err != nil {
		return bad("--process: %v", err)
	}
	pre, err := parseSize(*prefill)
	if err != nil {
		return bad("--prefill: %v", err)
	}
	ret, err := parseSize(*retain)
	if err != nil {
		return bad("--retain: %v", err)
	}
	fb, err := parseSize(*fetchBytes)
	if err != nil {
		return bad("--fetch-bytes: %v", err)
	}
	var baseConfig []byte
	if *configPath != "" {
		if baseConfig, err = os.ReadFile(*configPath); err != nil {
			return bad("--config: %v", err)
		}
	}
	wls := strings.Split(*workloads, ",")

	var configs []bench.Config
	for _, wl := range wls {
		for _, oop := range procs {
			if wl == bench.WorkloadProduceConsume && oop || wl == bench.WorkloadRaw && oop {
				continue // no driver process to choose
			}
			for _, b := range sizes {
				for _, i := range infl {
					for _, s := range strs {
						for _, l := range lings {
							c := bench.Config{Workload: wl, Driver: driverName(*driver), OutOfProcess: oop, BatchBytes: b,
								Inflight: i, Streams: s, Linger: l, Duration: *duration, Warmup: *warmup, Runs: *runs,
								PrefillBytes: int64(pre), RetainBytes: int64(ret), CatchupAppends: *catchupApp, FetchBytes: fb, Brokers: *brokers, System: *system,
								Rate: *rate, ActivePartitions: *active, MetricsURL: *metricsURL, MinIOMetricsURL: *minioURL,
								MinIOAccessKey: os.Getenv("STRATA_MINIO_ACCESS_KEY"), MinIOSecretKey: os.Getenv("STRATA_MINIO_SECRET_KEY"),
								DiskDir: *diskDir, Settle: *settle, BrokerPID: *brokerPID, NoConsume: !*consume, KeepTopic: *keepTopic}
							if wl == bench.WorkloadProduceConsume {
								c.Driver = "" // the broker's business
							}
							if err := c.Normalize(); err != nil {
								return bad("%v", err)
							}
							configs = append(configs, c)
						}
					}
				}
			}
		}
	}
	if len(configs) == 0 {
		return bad("no configuration to run (raw and produce-consume have no out-of-process form)")
	}

	rep := bench.Report{Meta: bench.CollectMeta(version, os.Getenv("STRATA_BENCH_COMMIT"))}
	code := 0
	for _, c := range configs {
		res, err := runBenchConfig(ctx, c, *driver, baseConfig, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "\nstrata bench: %v\n", err)
			code = 1
			if ctx.Err() != nil {
				break
			}
			continue
		}
		rep.Results = append(rep.Results, res)
	}
	table := stdout
	if *jsonOut {
		table = stderr
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "strata bench: %v\n", err)
			return 1
		}
	}
	_ = bench.WriteTable(table, rep.Results)
	if *outDir != "" && len(rep.Results) > 0 {
		if err := writeBenchOut(*outDir, rep); err != nil {
			fmt.Fprintf(stderr, "strata bench: %v\n", err)
			return 1
		}
	}
	return code
}

// driverName is the driver as reports name it: a built-in name, or a
// plugin binary's base name.
func driverName(d string) string {
	if strings.ContainsRune(d, '/') {
		return filepath.Base(d)
	}
	return d
}

// runBenchConfig opens the target of c, runs it and closes the target.
func runBenchConfig(ctx context.Context, c bench.Config, driver string, baseConfig []byte, stderr io.Writer) (bench.Result, error) {
	var t bench.Target
	if c.Workload != bench.WorkloadProduceConsume {
		config, cleanup, err := benchDriverConfig(driver, baseConfig, c.Linger)
		if err != nil {
			return bench.Result{}, err
		}
		defer cleanup()
		switch {
		case c.Workload == bench.WorkloadRaw:
			st, err := openBenchStorage(ctx, driver, config)
			if err != nil {
				return bench.Result{}, err
			}
			defer st.Close()
			t.Storage = st
		case c.OutOfProcess:
			drv, err := resolveDriver(driver)
			if err != nil {
				return bench.Result{}, err
			}
			store, err := plugin.Open(ctx, drv.Path, config, drv.options()...)
			if err != nil {
				return bench.Result{}, fmt.Errorf("driver %s: %w", driver, err)
			}
			defer store.Close()
			t.Store = store
		default:
			open, ok := inProcessOpeners[driver]
			if !ok {
				return bench.Result{}, fmt.Errorf("driver %q: in-process needs a built-in driver (%s); use --out-of-process for a plugin binary", driver, strings.Join(builtinDrivers, ", "))
			}
			store, err := open(ctx, config)
			if err != nil {
				return bench.Result{}, fmt.Errorf("driver %s: %w", driver, err)
			}
			defer store.Close()
			t.Store = store
		}
	}
	res, err := bench.Execute(ctx, c, t, stderr)
	fmt.Fprint(stderr, "\r\033[K")
	return res, err
}

// inProcessOpeners are the built-in drivers linked into this binary.
var inProcessOpeners = map[string]stream.Opener{
	"memory": memory.Open, "nfs": nfs.Open, "s3": s3.Open, "azure": azure.Open, "hdfs": hdfs.Open,
}

// openBenchStorage opens a built-in chunked driver's Storage alone, for
// the raw workload.
func openBenchStorage(ctx context.Context, driver string, config []byte) (chunked.Storage, error) {
	switch driver {
	case "memory":
		return chunked.NewMemStorage(), nil
	case "nfs":
		return openStorage(ctx, config, nfs.ParseConfig, nfs.OpenStorage)
	case "s3":
		return openStorage(ctx, config, s3.ParseConfig, s3.OpenStorage)
	case "azure":
		return openStorage(ctx, config, azure.ParseConfig, azure.OpenStorage)
	case "hdfs":
		return openStorage(ctx, config, hdfs.ParseConfig, hdfs.OpenStorage)
	}
	return nil, fmt.Errorf("driver %q: the raw workload needs a built-in chunked driver (nfs, s3, azure, hdfs)", driver)
}

// openStorage parses config with a driver's ParseConfig and opens its
// Storage with its OpenStorage.
func openStorage[C any, S chunked.Storage](ctx context.Context, config []byte, parse func([]byte) (C, error), open func(context.Context, C) (S, error)) (chunked.Storage, error) {
	c, err := parse(config)
	if err != nil {
		return nil, err
	}
	st, err := open(ctx, c)
	if err != nil {
		return nil, err // not a nil *S in a non-nil interface
	}
	return st, nil
}

// benchDriverConfig returns the driver config of a run: base (or a
// default for a built-in driver) with linger applied. cleanup removes
// what the default made.
func benchDriverConfig(driver string, base []byte, linger time.Duration) ([]byte, func(), error) {
	cleanup := func() {}
	if base == nil {
		switch driver {
		case "memory":
			base = fmt.Appendf(nil, "namespace: bench-%d\n", time.Now().UnixNano())
		case "nfs":
			dir, err := os.MkdirTemp("", "strata-bench-nfs-")
			if err != nil {
				return nil, nil, err
			}
			cleanup = func() { os.RemoveAll(dir) }
			base = fmt.Appendf(nil, "root: %s\n", dir)
		default:
			env := "STRATA_" + strings.ToUpper(driver) + "_CONFIG"
			if p := os.Getenv(env); p != "" && isBuiltin(driver) {
				b, err := os.ReadFile(p)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", env, err)
				}
				base = b
			} else if isBuiltin(driver) {
				return nil, nil, fmt.Errorf("driver %s needs --config or $%s (eval \"$(./testbed/up ...)\")", driver, env)
			}
		}
	}
	if linger == 0 {
		return base, cleanup, nil
	}
	doc := map[string]any{}
	if err := yaml.Unmarshal(base, &doc); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("--linger: the driver config is not a YAML mapping: %w", err)
	}
	switch driver {
	case "memory":
		cleanup()
		return nil, nil, fmt.Errorf("--linger: the memory driver has no group commit")
	case "nfs":
		doc["linger"] = linger.String()
	default:
		eng, _ := doc["engine"].(map[string]any)
		if eng == nil {
			eng = map[string]any{}
		}
		eng["linger"] = linger.String()
		doc["engine"] = eng
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return out, cleanup, nil
}

// writeBenchOut writes report.json and the charts into dir.
func writeBenchOut(dir string, rep bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return bench.WriteCharts(dir, rep.Results)
}

// runBenchReport implements `strata bench report`.
func runBenchReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata bench report", benchUsage, stderr)
	outDir := fs.String("out", "", "directory for the merged report.json and the charts")
	mdPath := fs.String("md", "", "write the Markdown section here (default stdout)")
	chartPath := fs.String("chart-path", "", "the charts' path as the Markdown links them (default --out)")
	combine := fs.Bool("combine", false, "merge results of equal labels (rounds of an interleaved run) into one, medians over all their runs")
	table := fs.Bool("table", false, "also print the table of medians on stderr")
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "strata bench report: no report files")
		return 2
	}
	var reps []bench.Report
	for _, p := range fs.Args() {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(stderr, "strata bench report: %v\n", err)
			return 2
		}
		var r bench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Fprintf(stderr, "strata bench report: %s: %v\n", p, err)
			return 2
		}
		reps = append(reps, r)
	}
	rep := bench.Merge(reps)
	if *combine {
		rep.Results = bench.Combine(rep.Results)
	}
	if *table {
		_ = bench.WriteTable(stderr, rep.Results)
	}
	if *outDir != "" {
		if err := writeBenchOut(*outDir, rep); err != nil {
			fmt.Fprintf(stderr, "strata bench report: %v\n", err)
			return 1
		}
	}
	cp := *chartPath
	if cp == "" {
		cp = *outDir
	}
	w := stdout
	if *mdPath != "" {
		f, err := os.Create(*mdPath)
		if err != nil {
			fmt.Fprintf(stderr, "strata bench report: %v\n", err)
			return 1
		}
		defer f.Close()
		w = f
	}
	bench.WriteMarkdown(w, rep, cp)
	return 0
}

// parseList parses a comma-separated list with parse.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSize parses a byte count: 4096, 1KiB, 64KiB, 1MiB, 1GiB (also K,
// M, G and KB/MB/GB as binary units).
func parseSize(s string) (int, error) {
	units := []struct {
		suffix string
		mult   int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := 1
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive byte count such as 4096, 64KiB or 1MiB", s)
	}
	return n * mult, nil
}
