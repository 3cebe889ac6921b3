package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
	"github.com/stratastream/strata/stream/wal"
)

const conformanceUsage = `Usage: strata conformance --driver NAME|PATH [flags]

Runs the conformance suites against a driver loaded out-of-process (its
plugin binary, through stream/plugin). NAME is a built-in driver (memory,
nfs, s3, azure, hdfs; built on demand from the source tree) and PATH a
plugin binary. The stream suite checks the Stream contract; the sharedlog
suite runs Kafka partition-log cases on top of the driver (its case names
start with "sharedlog/"). Progress goes to stderr, a per-case table to
stdout (to stderr with --json). Exit status: 0 nothing failed, 1 a case
failed, 2 bad input (flags, driver, config).

Flags:
`

// defaultDriverConfig is the config used for a built-in driver when no
// --config is given: the memory driver needs a named namespace so that a
// case's second store shares its streams (each case has a process of its
// own, so cases never see each other's streams).
var defaultDriverConfig = map[string]string{
	"memory": "namespace: strata-conformance\n",
}

// caseJSON is one case of the --json report.
type caseJSON struct {
	Name       string  `json:"name"`
	Family     string  `json:"family"`
	Status     string  `json:"status"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error"`
}

// reportJSON is the --json report (docs/design.md, "The conformance suite").
type reportJSON struct {
	Driver       string     `json:"driver"`
	OutOfProcess bool       `json:"out_of_process"`
	Suite        string     `json:"suite"`
	Passed       int        `json:"passed"`
	Failed       int        `json:"failed"`
	Skipped      int        `json:"skipped"`
	Cases        []caseJSON `json:"cases"`
}

// runConformance implements `strata conformance`.
func runConformance(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata conformance", conformanceUsage, stderr)
	var (
		driver     = fs.String("driver", "", "built-in driver name or path of a driver plugin binary (required)")
		configPath = fs.String("config", "", "driver config file (YAML or JSON)")
		suite      = fs.String("suite", conformance.SuiteStream, "suite to run: stream, sharedlog or all")
		runPat     = fs.String("run", "", "run only the cases whose family/name matches this regular expression")
		jsonOut    = fs.Bool("json", false, "print one JSON object with the results on stdout")
		junitPath  = fs.String("junit", "", "write JUnit XML results to this file")
		backendCtl = fs.String("backend-ctl", "", "command run as `CMD stop|start` to enable the fault family (e.g. './testbed/ctl minio')")
		seed       = fs.Int64("seed", 0, "seed for randomised cases (default $STRATA_SEED or a fresh one); a failing case prints it")
		timeout    = fs.Duration("timeout", 5*time.Minute, "time limit for one case")
		scale      = fs.Float64("scale", 1, "scale the sizes of the load-bearing cases (e.g. 0.25 for a slow backend)")
		streamSets = fs.Bool("stream-sets", false, "run the cases on virtual streams (stream/wal, as strata serve does by default) over the out-of-process driver")
		verbose    = fs.Bool("v", false, "print every case's log, and the driver's logs at debug level")
	)
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata conformance: %s\n", oneLine(fmt.Sprintf(format, a...)))
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q (flags only; see strata conformance -h)", fs.Arg(0))
	}
	if *driver == "" {
		return bad("--driver is required (a built-in name such as memory, or the path of a plugin binary)")
	}
	plan, err := planCases(*suite, *runPat)
	if err != nil {
		return bad("%v", err)
	}
	config := []byte(defaultDriverConfig[*driver])
	if *configPath == "" && *driver == "nfs" {
		// The embedded default: the nfs driver on a fresh local directory.
		dir, err := os.MkdirTemp("", "strata-conformance-nfs-")
		if err != nil {
			return bad("cannot make a directory for the nfs driver: %v", err)
		}
		defer os.RemoveAll(dir)
		config = fmt.Appendf(nil, "root: %q\n", dir)
		fmt.Fprintf(stderr, "strata conformance: nfs driver on the local directory %s (removed afterwards; --config to choose one)\n", dir)
	}
	if *configPath != "" {
		if config, err = os.ReadFile(*configPath); err != nil {
			return bad("cannot read driver config: %v", err)
		}
	}
	var junit *os.File
	if *junitPath != "" {
		if junit, err = os.Create(*junitPath); err != nil {
			return bad("cannot write --junit file: %v", err)
		}
		defer junit.Close()
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	defer plugin.CleanupClients()
	drv, err := resolveDriver(*driver)
	if err != nil {
		return bad("%v", err)
	}
	h, info, err := conformance.PluginHarness(ctx, drv.Path, config, append(drv.options(), plugin.WithLogger(logger))...)
	if err != nil {
		return bad("driver %s: %v", *driver, err)
	}
	layer := ""
	if *streamSets {
		h = conformance.WrapHarness(h, func(t conformance.T, base *stream.Store) *stream.Store {
			ws, err := wal.NewStore(base, wal.Options{Logger: logger})
			if err != nil {
				t.Fatalf("wal.NewStore: %v", err)
			}
			return stream.NewStore(ws)
		})
		layer = " on stream sets"
	}
	h.BackendCtl, h.Scale = *backendCtl, *scale
	h.Seed = conformance.ResolveSeed(*seed)

	fmt.Fprintf(stderr, "strata conformance: driver %s %s (%s), out of process%s, suite %s, %d cases, seed %d\n",
		info.Driver, info.Version, drv, layer, *suite, len(plan), h.Seed)
	rep := reportJSON{Driver: *driver, OutOfProcess: true, Suite: *suite, Cases: []caseJSON{}}
	var results []conformance.Result
	runID := fmt.Sprintf("cli%d", time.Now().UnixNano()%1e9)
	for i, p := range plan {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "strata conformance: interrupted after %d of %d cases\n", i, len(plan))
			break
		}
		c := p.c
		r := p.run(ctx, h, conformance.RunOptions{Seed: h.Seed, Timeout: *timeout, RunID: runID})
		r.Case = c
		results = append(results, r)
		fmt.Fprintf(stderr, "[%*d/%d] %-50s %s (%s)\n", len(fmt.Sprint(len(plan))), i+1, len(plan), c.FullName(), r.Status, r.Duration.Round(time.Millisecond))
		if r.Status == conformance.StatusFail || *verbose {
			for _, l := range r.Log {
				fmt.Fprintf(stderr, "        %s\n", strings.ReplaceAll(l, "\n", "\n        "))
			}
		}
		switch r.Status {
		case conformance.StatusPass:
			rep.Passed++
		case conformance.StatusFail:
			rep.Failed++
		case conformance.StatusSkip:
			rep.Skipped++
		}
		rep.Cases = append(rep.Cases, caseJSON{
			Name: c.FullName(), Family: c.Family, Status: string(r.Status),
			DurationMS: float64(r.Duration.Microseconds()) / 1000, Error: r.Error,
		})
	}
	interrupted := len(results) < len(plan)

	table := stdout
	if *jsonOut {
		table = stderr
	}
	printTable(table, results)
	fmt.Fprintf(table, "%d passed, %d failed, %d skipped (driver %s, seed %d)\n", rep.Passed, rep.Failed, rep.Skipped, *driver, h.Seed)
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return bad("write JSON: %v", err)
		}
	}
	if junit != nil {
		if err := writeJUnit(junit, *driver, results); err != nil {
			return bad("write --junit file %s: %v", *junitPath, err)
		}
	}
	if rep.Failed > 0 || interrupted {
		return 1
	}
	return 0
}

// planned is one case to run, named as the report shows it.
type planned struct {
	c   conformance.Case
	run func(ctx context.Context, h conformance.Harness, opts conformance.RunOptions) conformance.Result
}

// planCases lists the cases of suite ("stream", "sharedlog" or "all") whose
// reported name matches pattern. SharedLog cases are named
// "sharedlog/<family>/<case>" so that they never clash with stream cases.
func planCases(suite, pattern string) ([]planned, error) {
	var plan []planned
	switch suite {
	case conformance.SuiteStream, "sharedlog", "all":
	default:
		return nil, fmt.Errorf("unknown --suite %q: want stream, sharedlog or all", suite)
	}
	if suite != "sharedlog" {
		for _, c := range conformance.Cases() {
			plan = append(plan, planned{c: c, run: func(ctx context.Context, h conformance.Harness, o conformance.RunOptions) conformance.Result {
				return conformance.RunCase(ctx, h, c, o)
			}})
		}
	}
	if suite != conformance.SuiteStream {
		for _, sc := range sharedlogtest.Cases() {
			c := sc.Conformance()
			c.Family = sharedlogtest.Suite + "/" + c.Family
			plan = append(plan, planned{c: c, run: func(ctx context.Context, h conformance.Harness, o conformance.RunOptions) conformance.Result {
				return sharedlogtest.RunCase(ctx, h, sc, o)
			}})
		}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("--run: bad case pattern %q: %v", pattern, err)
	}
	var out []planned
	for _, p := range plan {
		if re.MatchString(p.c.FullName()) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--run %q matches no case of the %s suite", pattern, suite)
	}
	return out, nil
}

// oneLine folds a possibly chatty error message into one line, dropping
// go-plugin's generic advice after a failed handshake.
func oneLine(msg string) string {
	if i := strings.Index(msg, "\nThis usually means"); i >= 0 {
		msg = msg[:i]
	}
	return strings.Join(strings.Fields(msg), " ")
}

// printTable prints one row per case.
func printTable(w io.Writer, results []conformance.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tSTATUS\tTIME\tDETAIL")
	for _, r := range results {
		detail := r.Error
		if len(detail) > 100 {
			detail = detail[:97] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Case.FullName(), r.Status, r.Duration.Round(time.Millisecond), detail)
	}
	tw.Flush()
}

// JUnit XML, as CI systems (Jenkins, GitLab, GitHub actions) read it.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// writeJUnit writes the results as one test suite per family.
func writeJUnit(w io.Writer, driver string, results []conformance.Result) error {
	var out junitSuites
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.Case.Family]
		if !ok {
			i = len(out.Suites)
			index[r.Case.Family] = i
			out.Suites = append(out.Suites, junitSuite{Name: "strata.conformance." + driver + "." + strings.ReplaceAll(r.Case.Family, "/", ".")})
		}
		s := &out.Suites[i]
		jc := junitCase{Name: r.Case.Name, ClassName: s.Name, Time: seconds(r.Duration)}
		log := strings.Join(r.Log, "\n")
		switch r.Status {
		case conformance.StatusFail:
			jc.Failure = &junitMessage{Message: r.Error, Body: log}
			s.Failures++
		case conformance.StatusSkip:
			jc.Skipped = &junitMessage{Message: r.Error}
			s.Skipped++
		default:
			jc.SystemOut = log
		}
		s.Tests++
		d, _ := time.ParseDuration(s.Time + "s")
		s.Time = seconds(d + r.Duration)
		s.Cases = append(s.Cases, jc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
