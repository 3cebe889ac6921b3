package conformance

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Suite names. The sharedlog suite ("sharedlog") is defined by package
// sharedlog/sharedlogtest (docs/design.md, "The conformance suite").
const (
	SuiteStream = "stream"
)

// Families of the stream suite, in the order they run.
const (
	FamilyContract        = "contract"
	FamilyAppend          = "append"
	FamilyDurability      = "durability"
	FamilyFencing         = "fencing"
	FamilyReadOnly        = "readonly"
	FamilyLinearizability = "linearizability"
	FamilyLimits          = "limits"
	FamilyFault           = "fault"
)

var familyOrder = []string{
	FamilyContract, FamilyAppend, FamilyDurability, FamilyFencing,
	FamilyReadOnly, FamilyLinearizability, FamilyLimits, FamilyFault,
}

// Case is one conformance case.
type Case struct {
	// Suite is the suite the case belongs to (SuiteStream).
	Suite string
	// Family groups related cases ("contract", "fencing", ...).
	Family string
	// Name is the case's name within its family.
	Name string
	// Doc says in one line what the case checks.
	Doc string
	// Randomised cases draw from the run's seed and log it when they fail.
	Randomised bool

	run func(e *env)
}

// FullName is "family/name", the subtest name Run uses and the name the CLI
// reports and matches --run against.
func (c Case) FullName() string { return c.Family + "/" + c.Name }

var (
	registryMu sync.Mutex
	registry   []Case
)

// register adds cases to the stream suite. Each cases_*.go file calls it
// from a package-level var initialiser.
func register(family string, cases ...Case) bool {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, c := range cases {
		c.Suite, c.Family = SuiteStream, family
		registry = append(registry, c)
	}
	return true
}

// Cases returns every case of the stream suite, in run order (family order,
// then the order the family lists them).
func Cases() []Case {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := append([]Case(nil), registry...)
	rank := map[string]int{}
	for i, f := range familyOrder {
		rank[f] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Family] < rank[out[j].Family] })
	return out
}

// Select returns the cases whose FullName matches pattern (a regular
// expression, unanchored; empty selects all).
func Select(cases []Case, pattern string) ([]Case, error) {
	if pattern == "" {
		return cases, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("conformance: bad case pattern %q: %w", pattern, err)
	}
	var out []Case
	for _, c := range cases {
		if re.MatchString(c.FullName()) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run runs every case of the stream suite against the driver the harness
// opens, each as the subtest "family/case", one after another. A driver's
// own test calls it:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, harness) }
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("conformance: Harness.NewStore is nil")
	}
	seed := ResolveSeed(h.Seed)
	t.Logf("conformance: seed %d (replay with STRATA_SEED=%d)", seed, seed)
	run := newRunID()
	for _, c := range Cases() {
		t.Run(c.FullName(), func(t *testing.T) {
			runCase(t, h, c, seed, run)
		})
	}
}

// Status is the outcome of one case.
type Status string

// Outcomes of a case.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	StatusSkip Status = "skip"
)

// Result is the outcome of one case run by RunCase.
type Result struct {
	// Case is the case that ran.
	Case Case
	// Status is pass, fail or skip.
	Status Status
	// Duration is how long the case took, cleanups included.
	Duration time.Duration
	// Error is the first failure message (fail) or the skip reason (skip).
	Error string
	// Log is every line the case logged, failures included.
	Log []string
	// Seed is the seed the case ran with.
	Seed int64
}

// RunOptions tune RunCase.
type RunOptions struct {
	// Seed for randomised cases; zero means Harness.Seed, resolved as
	// ResolveSeed does.
	Seed int64
	// Timeout bounds one case; zero means 5 minutes. A case that times out
	// fails; its context is cancelled and its cleanups run.
	Timeout time.Duration
	// RunID names the run in stream names; empty picks a fresh one. Cases of
	// one run share it.
	RunID string
}

// RunCase runs one case outside `go test`, with a T of its own: Fatalf and
// Skipf stop the case, a panic fails it (with its stack in the log), and a
// case that outlives opts.Timeout fails.
func RunCase(ctx context.Context, h Harness, c Case, opts RunOptions) Result {
	opts.Seed = ResolveSeed(cmp.Or(opts.Seed, h.Seed))
	if opts.RunID == "" {
		opts.RunID = newRunID()
	}
	return RunFunc(ctx, c, opts, func(t T) {
		if h.NewStore == nil {
			t.Fatalf("conformance: Harness.NewStore is nil")
		}
		runCase(t, h, c, opts.Seed, opts.RunID)
	})
}

// RunFunc runs body as case c outside `go test`, with the runner RunCase
// uses: body gets a T whose Fatalf and Skipf stop it, a panic fails it
// (with its stack in the log), a body that outlives opts.Timeout (default 5
// minutes) fails and sees its context cancelled, and the cleanups run
// whatever happened. Other suites built on the Harness (the SharedLog
// suite) run their cases with it; c only names the case in the Result.
func RunFunc(ctx context.Context, c Case, opts RunOptions, body func(t T)) Result {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	ct := newCaseT(ctx, c.FullName())
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				ct.fail(fmt.Sprintf("panic: %v\n%s", r, buf))
			}
		}()
		body(ct)
	}()
	timer := time.NewTimer(opts.Timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		ct.fail(fmt.Sprintf("case timed out after %v", opts.Timeout))
		ct.cancel()
		// Give the case a moment to notice its cancelled context before the
		// cleanups close the stores under it.
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
	ct.runCleanups()
	res := Result{Case: c, Duration: time.Since(start), Seed: opts.Seed}
	res.Status, res.Error, res.Log = ct.outcome()
	return res
}

// ResolveSeed returns seed if it is not zero, else STRATA_SEED from the
// environment if set and valid, else a fresh seed.
func ResolveSeed(seed int64) int64 {
	if seed != 0 {
		return seed
	}
	if s := os.Getenv("STRATA_SEED"); s != "" {
		var v int64
		if _, err := fmt.Sscan(s, &v); err == nil && v != 0 {
			return v
		}
	}
	for {
		if v := time.Now().UnixNano() & (1<<53 - 1); v != 0 {
			return v
		}
	}
}

// caseT is the T of RunCase.
type caseT struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	skipped  bool
	first    string
	log      []string
	cleanups []func()
	tempDirs []string
}

func newCaseT(parent context.Context, name string) *caseT {
	ctx, cancel := context.WithCancel(parent)
	return &caseT{name: name, ctx: ctx, cancel: cancel}
}

func (t *caseT) Helper()      {}
func (t *caseT) Name() string { return t.name }

func (t *caseT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, fmt.Sprintf(format, args...))
}

func (t *caseT) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	if t.first == "" {
		t.first = msg
	}
	t.log = append(t.log, msg)
}

func (t *caseT) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

func (t *caseT) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (t *caseT) Skipf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.skipped = true
	if t.first == "" || !t.failed {
		t.first = msg
	}
	t.log = append(t.log, msg)
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *caseT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *caseT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *caseT) Context() context.Context { return t.ctx }

func (t *caseT) TempDir() string {
	dir, err := os.MkdirTemp("", "strata-conformance-")
	if err != nil {
		t.Fatalf("conformance: temp dir: %v", err)
	}
	t.mu.Lock()
	t.tempDirs = append(t.tempDirs, dir)
	t.mu.Unlock()
	return dir
}

// runCleanups cancels the context, then runs the cleanups last first, each
// protected from panics and Goexit.
func (t *caseT) runCleanups() {
	t.cancel()
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			dirs := t.tempDirs
			t.tempDirs = nil
			t.mu.Unlock()
			for _, d := range dirs {
				_ = os.RemoveAll(d)
			}
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if r := recover(); r != nil {
					t.fail(fmt.Sprintf("panic in cleanup: %v", r))
				}
			}()
			f()
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.fail("a cleanup did not return within a minute")
		}
	}
}

func (t *caseT) outcome() (Status, string, []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log := append([]string(nil), t.log...)
	switch {
	case t.failed:
		return StatusFail, firstLine(t.first), log
	case t.skipped:
		return StatusSkip, firstLine(t.first), log
	}
	return StatusPass, "", log
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
