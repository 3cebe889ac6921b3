package chunked

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratastream/strata/stream"
)

// The deterministic simulation test of the real engine (docs/engine.md,
// "Simulation"). Each schedule runs several engine Stores ("processes") on
// one simulated storage whose every call is an operation that a seeded
// scheduler applies, answers, times out (the put may still land later) or
// drops, in any order; processes open with lower, equal and higher epochs,
// append, trim (with GC), fetch, close and crash; read-only readers fetch.
// After every step the guarantees of the Stream contract (docs/design.md)
// are checked.
//
//	go test ./stream/chunked -run 'TestSimulation$'                                # default budget
//	go test ./stream/chunked -run 'TestSimulation$' -sim.runs 100000 -timeout 0    # longer
//	go test ./stream/chunked -run 'TestSimulation$' -sim.seed 42 -v                # replay one seed
//
// STRATA_SIM_SEED and STRATA_SIM_RUNS do the same as the flags.
var (
	simSeedFlag  = flag.Uint64("sim.seed", 0, "TestSimulation: replay only this seed")
	simRunsFlag  = flag.Int("sim.runs", 0, "TestSimulation: number of schedules (default 2000, 300 with -short)")
	simStepsFlag = flag.Int("sim.steps", 0, "TestSimulation: steps per schedule (default 400)")
	simFirstFlag = flag.Uint64("sim.first", 1, "TestSimulation: first seed")
)

const simOpTimeout = time.Second

func TestSimulation(t *testing.T) {
	runs, steps, first := 2000, 400, *simFirstFlag
	if testing.Short() {
		runs = 300
	}
	if *simRunsFlag > 0 {
		runs = *simRunsFlag
	} else if v, err := strconv.Atoi(os.Getenv("STRATA_SIM_RUNS")); err == nil && v > 0 {
		runs = v
	}
	if *simStepsFlag > 0 {
		steps = *simStepsFlag
	}
	seeds := []uint64{}
	if *simSeedFlag != 0 {
		seeds = append(seeds, *simSeedFlag)
	} else if v, err := strconv.ParseUint(os.Getenv("STRATA_SIM_SEED"), 10, 64); err == nil && v != 0 {
		seeds = append(seeds, v)
	} else {
		for i := range runs {
			seeds = append(seeds, first+uint64(i))
		}
	}
	var total simStats
	for _, seed := range seeds {
		res := runSchedule(t, seed, steps, len(seeds) == 1 && testing.Verbose())
		total.add(res.stats)
		if res.violation != "" {
			t.Fatalf("simulation seed %d: VIOLATION at step %d: %s\nreplay: go test ./stream/chunked -run 'TestSimulation$' -sim.seed %d -v\nlast steps:\n%s",
				seed, res.step, res.violation, seed, strings.Join(res.trace, "\n"))
		}
	}
	t.Logf("simulation: %d schedules, %d steps, 0 violations; %s", len(seeds), total.steps, total)
}

type simStats struct {
	steps, acks, failedAppends, opens, fencedOpens, trims, deletes, crashes, lateLands, timeouts, fetches, stale int
}

func (a *simStats) add(b simStats) {
	a.steps += b.steps
	a.acks += b.acks
	a.failedAppends += b.failedAppends
	a.opens += b.opens
	a.fencedOpens += b.fencedOpens
	a.trims += b.trims
	a.deletes += b.deletes
	a.crashes += b.crashes
	a.lateLands += b.lateLands
	a.timeouts += b.timeouts
	a.fetches += b.fetches
	a.stale += b.stale
}

func (a simStats) String() string {
	return fmt.Sprintf("acks %d, failed appends %d, opens %d (fenced %d), trims %d, deletes %d, crashes %d, timeouts %d (landed later %d), fetches %d, stale-session acks after a newer open %d",
		a.acks, a.failedAppends, a.opens, a.fencedOpens, a.trims, a.deletes, a.crashes, a.timeouts, a.lateLands, a.fetches, a.stale)
}

type simResult struct {
	violation string
	step      int
	trace     []string
	stats     simStats
}

// ---- the simulated storage ----

type simOp struct {
	seq     uint64
	proc    int
	kind    string
	key     string
	data    []byte
	off, n  int64
	keys    []string
	after   string
	limit   int
	applied bool
	waiting bool
	late    bool // timed out before it was applied; may still land
	done    chan struct{}
	closed  bool
	resData []byte
	resKeys []string
	resSize int64
	err     error
}

// release lets the caller's goroutine return (w.mu held).
func (o *simOp) release() {
	if !o.closed {
		o.closed = true
		close(o.done)
	}
}

func (o *simOp) mutates() bool {
	return o.kind == "putifabsent" || o.kind == "put" || o.kind == "delete"
}

func (o *simOp) String() string {
	s := fmt.Sprintf("p%d %s %s", o.proc, o.kind, strings.TrimPrefix(o.key, simStream+rootSuffix))
	if o.kind == "delete" {
		s += fmt.Sprintf(" %d keys", len(o.keys))
	}
	return s
}

type simWorld struct {
	mu       sync.Mutex
	rng      *rand.Rand
	objs     map[string][]byte
	mut      uint64
	ops      []*simOp
	opSeq    uint64
	procs    []*simProc
	shutdown bool
	idSeq    atomic.Int64

	step      int
	trace     []string
	violation string
	vstep     int
	stats     simStats

	acks      []simAck
	seen      map[string]map[int64]string // incarnation -> offset -> append id, from every view and ack
	deleting  bool
	canonInc  string           // the incarnation a fresh reader saw last ("" deleted)
	gone      map[string]bool  // incarnations a fresh reader saw replaced or deleted
	starts    map[string]int64 // incarnation -> the highest start offset a fresh reader saw
	deletes   int
	opens     []simOpen
	trims     []simTrim
	canonMut  uint64
	maxEpoch  uint64
	broken    brokenRules
	faultRate int
	verbose   bool
	appendID  int
}

type simAck struct {
	inc      string
	proc     int
	idx      int
	id       string
	off, end int64
	payload  []byte
	step     int
	sess     sessionKey
}

type simOpen struct {
	inc   string
	proc  int
	sess  sessionKey
	next  int64
	step  int
	begin int
}

type simTrim struct {
	inc   string
	proc  int
	to    int64
	begin int
}

type simProc struct {
	id         int
	reader     bool
	epoch      uint64
	store      *stream.Store
	st         *stream.Stream
	sess       sessionKey
	inc        string
	deleter    bool
	crashed    bool
	closed     bool
	failed     bool // open failed
	busy       bool
	apps       chan simAppend
	appsClosed bool
	nApps      int
	openedAt   int
}

// closeApps ends the process's appender (w.mu held).
func (p *simProc) closeApps() {
	if p.apps != nil && !p.appsClosed {
		p.appsClosed = true
		close(p.apps)
	}
}

type simAppend struct {
	idx   int
	id    string
	batch stream.Batch
}

// simStorage is one process's view of the simulated storage.
type simStorage struct {
	w *simWorld
	p int
}

func (s simStorage) do(ctx context.Context, op *simOp) error {
	w := s.w
	w.mu.Lock()
	if w.shutdown || w.procs[s.p].crashed {
		w.mu.Unlock()
		return fmt.Errorf("%w: simulated storage: process %d is gone", stream.ErrUnavailable, s.p)
	}
	w.opSeq++
	op.seq, op.proc, op.waiting, op.done = w.opSeq, s.p, true, make(chan struct{})
	w.ops = append(w.ops, op)
	w.mu.Unlock()
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		w.mu.Lock()
		if op.waiting {
			op.waiting = false
			op.late = !op.applied && op.mutates()
			w.gc()
		}
		w.mu.Unlock()
		return fmt.Errorf("%w: simulated storage: %s: %w", stream.ErrUnavailable, op.key, ctx.Err())
	}
}

func (s simStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.do(ctx, &simOp{kind: "putifabsent", key: key, data: bytes.Clone(data)})
}

func (s simStorage) Put(ctx context.Context, key string, data []byte) error {
	return s.do(ctx, &simOp{kind: "put", key: key, data: bytes.Clone(data)})
}

func (s simStorage) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	op := &simOp{kind: "get", key: key, off: off, n: n}
	err := s.do(ctx, op)
	return op.resData, err
}

func (s simStorage) Stat(ctx context.Context, key string) (int64, error) {
	op := &simOp{kind: "stat", key: key}
	err := s.do(ctx, op)
	return op.resSize, err
}

func (s simStorage) Delete(ctx context.Context, keys []string) error {
	return s.do(ctx, &simOp{kind: "delete", key: strings.Join(keys, ","), keys: slices.Clone(keys)})
}

func (s simStorage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	op := &simOp{kind: "list", key: prefix, after: after, limit: limit}
	err := s.do(ctx, op)
	return op.resKeys, err
}

func (s simStorage) Close() error { return nil }

// apply performs op on the objects (w.mu held).
func (w *simWorld) apply(op *simOp) {
	op.applied = true
	switch op.kind {
	case "putifabsent":
		if _, ok := w.objs[op.key]; ok {
			op.err = fmt.Errorf("%w: %s", stream.ErrAlreadyExists, op.key)
			return
		}
		w.objs[op.key] = op.data
		w.mut++
	case "put":
		w.objs[op.key] = op.data
		w.mut++
	case "get", "stat":
		b, ok := w.objs[op.key]
		if !ok {
			op.err = fmt.Errorf("%w: %s", stream.ErrNotFound, op.key)
			return
		}
		op.resSize = int64(len(b))
		off := min(op.off, int64(len(b)))
		end := int64(len(b))
		if op.n >= 0 {
			end = min(end, off+op.n)
		}
		op.resData = bytes.Clone(b[off:end])
	case "delete":
		for _, k := range op.keys {
			delete(w.objs, k)
		}
		w.mut++
	case "list":
		var keys []string
		for k := range w.objs {
			if strings.HasPrefix(k, op.key) && k > op.after {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if op.limit > 0 && len(keys) > op.limit {
			keys = keys[:op.limit]
		}
		op.resKeys = keys
	}
}

// directStorage reads and writes the simulated objects at once, without
// faults: the checker's window on the truth.
type directStorage struct{ w *simWorld }

func (d directStorage) call(op *simOp) *simOp {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	d.w.apply(op)
	return op
}

func (d directStorage) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return d.call(&simOp{kind: "putifabsent", key: key, data: bytes.Clone(data)}).err
}
func (d directStorage) Put(ctx context.Context, key string, data []byte) error {
	return d.call(&simOp{kind: "put", key: key, data: bytes.Clone(data)}).err
}
func (d directStorage) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	op := d.call(&simOp{kind: "get", key: key, off: off, n: n})
	return op.resData, op.err
}
func (d directStorage) Stat(ctx context.Context, key string) (int64, error) {
	op := d.call(&simOp{kind: "stat", key: key})
	return op.resSize, op.err
}
func (d directStorage) Delete(ctx context.Context, keys []string) error {
	return d.call(&simOp{kind: "delete", keys: keys}).err
}
func (d directStorage) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	op := d.call(&simOp{kind: "list", key: prefix, after: after, limit: limit})
	return op.resKeys, op.err
}
func (d directStorage) Close() error { return nil }

// ---- the schedule ----

const simStream = "sim/s"

func (w *simWorld) newID() string {
	return fmt.Sprintf("id%d", w.idSeq.Add(1))
}

// procIDs returns process p's id source: deterministic whatever the
// order in which goroutines of different processes ask.
func procIDs(p int) func() string {
	var n atomic.Int64
	return func() string { return fmt.Sprintf("p%di%d", p, n.Add(1)) }
}

func (w *simWorld) opts(p int) Options {
	o := Options{Driver: "sim", OpTimeout: simOpTimeout, NewID: procIDs(p), MaxInflightChunks: 1 + w.rng.IntN(3),
		MaxChunkBytes: 64 << w.rng.IntN(3), CheckpointChunks: 2 + w.rng.IntN(6), broken: w.broken}
	if w.rng.IntN(3) == 0 {
		o.Linger = time.Millisecond
	}
	if w.rng.IntN(4) == 0 {
		o.CacheBytes = -1
	}
	// Index pages of 2-5 entries, or none.
	if o.IndexPageEntries = 1 + w.rng.IntN(5); o.IndexPageEntries == 1 {
		o.IndexPageEntries = -1
	}
	return o
}

func (w *simWorld) violate(format string, a ...any) {
	if w.violation == "" {
		w.violation = fmt.Sprintf(format, a...)
		w.vstep = w.step
	}
}

func (w *simWorld) logf(format string, a ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%4d: ", w.step)+fmt.Sprintf(format, a...))
}

func runSchedule(t *testing.T, seed uint64, steps int, verbose bool) simResult {
	return runScheduleWith(t, seed, steps, verbose, brokenRules{})
}

func runScheduleWith(t *testing.T, seed uint64, steps int, verbose bool, broken brokenRules) simResult {
	w := &simWorld{broken: broken, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), objs: map[string][]byte{},
		seen: map[string]map[int64]string{}, gone: map[string]bool{}, starts: map[string]int64{}, verbose: verbose}
	w.faultRate = 6 + w.rng.IntN(40)
	synctest.Test(t, func(t *testing.T) {
		direct, err := NewStore(directStorage{w}, Options{Driver: "sim-direct", NewID: w.newID})
		if err != nil {
			t.Fatal(err)
		}
		if err := direct.Create(context.Background(), simStream); err != nil {
			t.Fatal(err)
		}
		direct.Close()
		for w.step = 1; w.step <= steps; w.step++ {
			synctest.Wait()
			w.mu.Lock()
			acts := w.enabled()
			w.mu.Unlock()
			if len(acts) == 0 {
				break
			}
			mark := len(w.trace)
			acts[w.rng.IntN(len(acts))]()
			synctest.Wait()
			w.mu.Lock()
			// Goroutines woken by one step log in any order: sort the
			// step's lines so that a replay prints the same trace.
			slices.Sort(w.trace[mark:])
			w.mu.Unlock()
			w.check()
			w.mu.Lock()
			v := w.violation
			w.mu.Unlock()
			if v != "" {
				break
			}
		}
		w.stats.steps = w.step
		w.finish()
	})
	res := simResult{violation: w.violation, step: w.vstep, stats: w.stats}
	if w.violation != "" || verbose {
		res.trace = w.trace
		if len(res.trace) > 150 && !verbose {
			res.trace = res.trace[len(res.trace)-150:]
		}
	}
	if verbose {
		t.Logf("seed %d trace:\n%s", seed, strings.Join(w.trace, "\n"))
	}
	return res
}

// enabled lists the actions possible now, in a deterministic order (w.mu
// held). Each action runs with w.mu not held.
func (w *simWorld) enabled() []func() {
	var acts, faults []func()
	add := func(weight int, f func()) {
		for range weight {
			acts = append(acts, f)
		}
	}
	fault := func(f func()) { faults = append(faults, f) }
	ops := slices.Clone(w.ops)
	sort.SliceStable(ops, func(i, j int) bool {
		a, b := ops[i], ops[j]
		if a.proc != b.proc {
			return a.proc < b.proc
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.key != b.key {
			return a.key < b.key
		}
		if c := bytes.Compare(a.data, b.data); c != 0 {
			return c < 0
		}
		return a.seq < b.seq
	})
	for _, op := range ops {
		if !op.applied && !w.procs[op.proc].crashed || !op.applied && op.late {
			add(4, func() { w.act(func() { w.apply(op); w.logf("apply %v -> %v", op, op.err); w.finishOp(op, false) }) })
		}
		if op.waiting && !w.procs[op.proc].crashed {
			if !op.applied {
				add(8, func() {
					w.act(func() { w.apply(op); w.logf("complete %v -> %v", op, op.err); w.finishOp(op, true) })
				})
			} else {
				add(4, func() { w.act(func() { w.logf("answer %v -> %v", op, op.err); w.finishOp(op, true) }) })
			}
			fault(func() {
				w.act(func() {
					w.stats.timeouts++
					op.err = fmt.Errorf("%w: simulated timeout of %s", stream.ErrUnavailable, op.key)
					op.waiting = false
					op.late = !op.applied && op.mutates() && w.rng.IntN(2) == 0
					w.logf("time out %v (applied %v, may land later %v)", op, op.applied, op.late)
					op.release()
					w.gc()
				})
			})
		}
		if op.late && !op.applied {
			fault(func() { w.act(func() { op.late = false; w.logf("drop %v", op); w.gc() }) })
		}
	}
	writers, readers, liveW, liveR := 0, 0, 0, 0
	for _, p := range w.procs {
		if p.reader {
			readers++
		} else {
			writers++
		}
		if p.crashed || p.closed || p.failed {
			continue
		}
		if p.reader {
			liveR++
		} else {
			liveW++
		}
		if p.busy || p.st == nil {
			continue
		}
		if p.reader {
			add(1, func() { w.fetch(p) })
			continue
		}
		if p.nApps < 16 {
			add(6, func() { w.appendOne(p) })
		}
		add(1, func() { w.trim(p) })
		add(1, func() { w.fetch(p) })
		fault(func() { w.crash(p) })
		if w.rng.IntN(4) == 0 {
			add(1, func() { w.closeProc(p) })
		}
	}
	if w.deletes < 2 && !w.deleting {
		fault(func() { w.deleteStream() })
	}
	if writers < 12 && liveW < 3 {
		add(1, func() { w.openWriter() })
	}
	if readers < 4 && liveR < 2 {
		add(1, func() { w.openReader() })
	}
	if liveW+liveR > 0 {
		add(1, func() { w.act(func() { w.logf("tick 1ms") }); time.Sleep(time.Millisecond) })
	}
	if liveW+liveR > 0 {
		fault(func() {
			w.act(func() { w.logf("tick %v (engine timeouts fire)", simOpTimeout) })
			time.Sleep(simOpTimeout)
		})
	}
	// Faults (timeouts, lost late puts, crashes, engine timeouts) take
	// one step in w.faultRate.
	if len(faults) > 0 && (len(acts) == 0 || w.rng.IntN(w.faultRate) == 0) {
		return faults
	}
	return acts
}

func (w *simWorld) act(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

// finishOp answers op (if answer) and forgets it when nothing more can
// happen to it.
func (w *simWorld) finishOp(op *simOp, answer bool) {
	if op.late && op.applied {
		w.stats.lateLands++
		op.late = false
	}
	if answer && op.waiting {
		op.waiting = false
		op.release()
	}
	w.gc()
}

func (w *simWorld) gc() {
	w.ops = slices.DeleteFunc(w.ops, func(o *simOp) bool {
		if o.waiting {
			return false
		}
		if !o.applied && o.late {
			return false
		}
		o.release()
		return true
	})
}

func (w *simWorld) newProc(reader bool) *simProc {
	p := &simProc{id: len(w.procs), reader: reader}
	w.procs = append(w.procs, p)
	s, err := NewStore(simStorage{w, p.id}, w.opts(p.id))
	if err != nil {
		panic(err)
	}
	p.store = s
	return p
}

func (w *simWorld) openWriter() {
	w.mu.Lock()
	e := w.maxEpoch + 1
	switch r := w.rng.IntN(4); {
	case r == 0 && w.maxEpoch > 0:
		e = w.maxEpoch - 1
	case r == 1:
		e = w.maxEpoch
	}
	w.maxEpoch = max(w.maxEpoch, e)
	w.mu.Unlock()
	p := w.newProcLocked(false)
	w.mu.Lock()
	p.epoch, p.busy = e, true
	begin := w.step
	w.logf("p%d: Open(epoch %d) begins", p.id, e)
	w.mu.Unlock()
	go func() {
		st, err := p.store.Open(context.Background(), simStream, stream.OpenOptions{Epoch: e, CreateIfMissing: true})
		w.mu.Lock()
		defer w.mu.Unlock()
		p.busy = false
		if p.crashed {
			return
		}
		w.stats.opens++
		if err != nil {
			p.failed = true
			if errors.Is(err, stream.ErrFenced) {
				w.stats.fencedOpens++
			} else if !errors.Is(err, stream.ErrUnavailable) && !(errors.Is(err, stream.ErrNotFound) && w.deletes > 0) {
				// (ErrNotFound: deleted again while Open recreated it, three times)
				w.violate("p%d: Open(epoch %d): unexpected error %v", p.id, e, err)
			}
			w.logf("p%d: Open(epoch %d) fails: %v", p.id, e, err)
			return
		}
		wr := st.Driver().(*writer)
		p.st, p.sess, p.inc, p.openedAt = st, wr.self, wr.l.inc, w.step
		next := st.NextOffset()
		w.logf("p%d: Open(epoch %d) returns session %v next %d", p.id, e, p.sess, next)
		for _, o := range w.opens {
			if o.inc == p.inc && o.sess.Epoch > e && o.step < begin {
				w.violate("p%d: Open(epoch %d) succeeded after an Open(epoch %d) had returned", p.id, e, o.sess.Epoch)
			}
		}
		for _, a := range w.acks {
			if a.inc == p.inc && a.step < begin && a.end > next {
				w.violate("p%d: Open returned next %d, below acked %s [%d, %d)", p.id, next, a.id, a.off, a.end)
			}
		}
		w.opens = append(w.opens, simOpen{inc: p.inc, proc: p.id, sess: p.sess, next: next, step: w.step, begin: begin})
		p.apps = make(chan simAppend, 64)
		go w.appender(p, st, p.apps)
	}()
}

func (w *simWorld) newProcLocked(reader bool) *simProc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newProc(reader)
}

func (w *simWorld) openReader() {
	p := w.newProcLocked(true)
	w.mu.Lock()
	p.busy = true
	w.logf("p%d: read-only Open begins", p.id)
	w.mu.Unlock()
	go func() {
		st, err := p.store.Open(context.Background(), simStream, stream.OpenOptions{Mode: stream.ModeReadOnly})
		w.mu.Lock()
		defer w.mu.Unlock()
		p.busy = false
		if err != nil {
			p.failed = true
			if !errors.Is(err, stream.ErrUnavailable) && !(errors.Is(err, stream.ErrNotFound) && w.deletes > 0) {
				w.violate("p%d: read-only Open: unexpected error %v", p.id, err)
			}
			w.logf("p%d: read-only Open fails: %v", p.id, err)
			return
		}
		p.st, p.inc = st, st.Driver().(*reader).l.inc
		w.logf("p%d: read-only Open returns next %d", p.id, st.NextOffset())
	}()
}

func (w *simWorld) appender(p *simProc, st *stream.Stream, apps chan simAppend) {
	for a := range apps {
		f := st.Append(context.Background(), a.batch)
		go func() {
			res, err := f.Result()
			w.onAppend(p, a, res, err)
		}()
	}
}

func (w *simWorld) appendOne(p *simProc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.appendID++
	id := fmt.Sprintf("p%d-a%d", p.id, p.nApps)
	a := simAppend{idx: p.nApps, id: id, batch: stream.Batch{Count: uint32(1 + w.rng.IntN(3)), Timestamp: int64(w.appendID),
		Payload: []byte(id + strings.Repeat(".", w.rng.IntN(40)))}}
	p.nApps++
	w.logf("p%d: Append %s (count %d)", p.id, id, a.batch.Count)
	p.apps <- a
}

func simAppendID(payload []byte) string {
	return string(bytes.TrimRight(payload, "."))
}

func (w *simWorld) onAppend(p *simProc, a simAppend, res stream.AppendResult, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.crashed {
		return
	}
	if err != nil {
		w.stats.failedAppends++
		if !errors.Is(err, stream.ErrFenced) && !errors.Is(err, stream.ErrUnavailable) && !errors.Is(err, stream.ErrClosed) {
			w.violate("p%d: append %s: unexpected error %v", p.id, a.id, err)
		}
		w.logf("p%d: append %s fails: %v", p.id, a.id, err)
		return
	}
	w.stats.acks++
	end := res.BaseOffset + int64(a.batch.Count)
	w.logf("p%d: ACK %s at [%d, %d)", p.id, a.id, res.BaseOffset, end)
	if res.NextOffset != end {
		w.violate("p%d: ack of %s: next %d, want %d", p.id, a.id, res.NextOffset, end)
	}
	// Futures complete in call order, but their waiters report in any
	// order: compare with every ack of this process.
	for _, old := range w.acks {
		if old.proc == p.id && (old.idx < a.idx) != (old.off < res.BaseOffset) {
			w.violate("p%d: %s (call %d) acked at %d, %s (call %d) at %d: not in call order", p.id, a.id, a.idx, res.BaseOffset, old.id, old.idx, old.off)
		}
	}
	for _, o := range w.opens {
		if o.inc == p.inc && p.sess.less(o.sess) {
			w.stats.stale++
			if end > o.next {
				w.violate("p%d (session %v): acked %s at [%d, %d) after the open of newer session %v returned next %d", p.id, p.sess, a.id, res.BaseOffset, end, o.sess, o.next)
			}
		}
	}
	for _, old := range w.acks {
		if old.id == a.id {
			w.violate("%s acked twice", a.id)
		}
		if old.inc == p.inc && old.off < end && res.BaseOffset < old.end {
			w.violate("%s acked at [%d, %d), overlapping %s acked at [%d, %d)", a.id, res.BaseOffset, end, old.id, old.off, old.end)
		}
	}
	w.see(p.inc, res.BaseOffset, end, a.id, "ack of "+a.id)
	w.acks = append(w.acks, simAck{inc: p.inc, proc: p.id, idx: a.idx, id: a.id, off: res.BaseOffset, end: end, payload: a.batch.Payload, step: w.step, sess: p.sess})
}

func (w *simWorld) see(inc string, off, end int64, id, who string) {
	seen := w.seen[inc]
	if seen == nil {
		seen = map[int64]string{}
		w.seen[inc] = seen
	}
	for o := off; o < end; o++ {
		if prev, ok := seen[o]; ok && prev != id {
			w.violate("divergence: offset %d of incarnation %s held %s, %s sees %s", o, inc, prev, who, id)
		}
		seen[o] = id
	}
}

func (w *simWorld) trim(p *simProc) {
	w.mu.Lock()
	start, next := p.st.StartOffset(), p.st.NextOffset()
	to := start + w.rng.Int64N(next-start+1)
	p.busy = true
	begin := w.step
	w.logf("p%d: Trim(%d) begins", p.id, to)
	w.mu.Unlock()
	go func() {
		err := p.st.Trim(context.Background(), to)
		w.mu.Lock()
		defer w.mu.Unlock()
		p.busy = false
		if p.crashed {
			return
		}
		w.logf("p%d: Trim(%d) -> %v", p.id, to, err)
		if err != nil {
			if !errors.Is(err, stream.ErrFenced) && !errors.Is(err, stream.ErrUnavailable) && !errors.Is(err, stream.ErrClosed) {
				w.violate("p%d: Trim(%d): unexpected error %v", p.id, to, err)
			}
			return
		}
		w.stats.trims++
		for _, o := range w.opens {
			if o.inc == p.inc && p.sess.less(o.sess) && o.step < begin {
				w.violate("p%d: Trim(%d) issued after the open of newer session %v returned, and it succeeded", p.id, to, o.sess)
			}
		}
		w.trims = append(w.trims, simTrim{inc: p.inc, proc: p.id, to: to, begin: begin})
	}()
}

func (w *simWorld) fetch(p *simProc) {
	w.mu.Lock()
	p.busy = true
	ackedBefore := len(w.acks)
	w.logf("p%d: fetch-all begins", p.id)
	w.mu.Unlock()
	go func() {
		ctx := context.Background()
		from := p.st.StartOffset()
		first := from
		var got []stream.Batch
		var err error
		for {
			var bs []stream.Batch
			bs, err = p.st.Fetch(ctx, from, stream.NoEnd, 200)
			if err != nil || len(bs) == 0 {
				break
			}
			got = append(got, bs...)
			from = bs[len(bs)-1].EndOffset()
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		p.busy = false
		if p.crashed {
			return
		}
		w.stats.fetches++
		if err != nil {
			if !errors.Is(err, stream.ErrUnavailable) && !errors.Is(err, stream.ErrOffsetOutOfRange) && !errors.Is(err, stream.ErrClosed) &&
				!errors.Is(err, stream.ErrFenced) && !(errors.Is(err, stream.ErrNotFound) && w.gone[p.inc]) {
				w.violate("p%d: fetch: unexpected error %v", p.id, err)
			}
			w.logf("p%d: fetch-all fails: %v", p.id, err)
			return
		}
		var must []simAck
		if p.reader {
			must = w.acks[:ackedBefore]
		}
		w.checkView(fmt.Sprintf("p%d fetch", p.id), p.inc, got, first, must)
		w.logf("p%d: fetch-all returns %d batches", p.id, len(got))
	}()
}

// checkView checks a complete view of the log (w.mu held): contiguous,
// consistent with everything seen so far, and (read-after-ack) holding
// every ack in mustHold that lies at or above from.
func (w *simWorld) checkView(who, inc string, bs []stream.Batch, from int64, mustHold []simAck) {
	ids := map[string]int64{}
	for i, b := range bs {
		if i > 0 && b.BaseOffset != bs[i-1].EndOffset() {
			w.violate("%s: gap between %d and %d", who, bs[i-1].EndOffset(), b.BaseOffset)
		}
		id := simAppendID(b.Payload)
		if prev, ok := ids[id]; ok {
			w.violate("%s: %s appears at %d and at %d", who, id, prev, b.BaseOffset)
		}
		ids[id] = b.BaseOffset
		w.see(inc, b.BaseOffset, b.EndOffset(), id, who)
	}
	for _, a := range mustHold {
		if a.inc != inc || a.off < from {
			continue
		}
		if off, ok := ids[a.id]; !ok || off != a.off {
			w.violate("%s: acked %s at %d missing (read-after-ack)", who, a.id, a.off)
		}
	}
}

// deleteStream deletes the stream from a process of its own.
func (w *simWorld) deleteStream() {
	p := w.newProcLocked(false)
	w.mu.Lock()
	p.deleter, p.busy, w.deleting = true, true, true
	w.deletes++
	w.logf("p%d: Delete begins", p.id)
	w.mu.Unlock()
	go func() {
		err := p.store.Delete(context.Background(), simStream)
		w.mu.Lock()
		defer w.mu.Unlock()
		p.busy, p.closed, w.deleting = false, true, false
		w.logf("p%d: Delete -> %v", p.id, err)
		if err != nil && !errors.Is(err, stream.ErrUnavailable) && !errors.Is(err, stream.ErrNotFound) {
			w.violate("p%d: Delete: unexpected error %v", p.id, err)
		}
		if err == nil {
			w.stats.deletes++
		}
	}()
}

func (w *simWorld) closeProc(p *simProc) {
	w.mu.Lock()
	p.busy = true
	w.logf("p%d: Close begins", p.id)
	w.mu.Unlock()
	go func() {
		err := p.st.Close()
		w.mu.Lock()
		defer w.mu.Unlock()
		p.busy, p.closed = false, true
		p.closeApps()
		w.logf("p%d: Close -> %v", p.id, err)
	}()
}

func (w *simWorld) crash(p *simProc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p.crashed = true
	w.stats.crashes++
	w.logf("p%d: CRASH", p.id)
	// Its unanswered operations may still land (they are "late" now).
	for _, op := range w.ops {
		if op.proc == p.id && !op.applied {
			op.late = op.mutates() && w.rng.IntN(2) == 0
		}
	}
	w.gcCrashed()
}

func (w *simWorld) gcCrashed() {
	w.ops = slices.DeleteFunc(w.ops, func(o *simOp) bool {
		return w.procs[o.proc].crashed && !(o.late && !o.applied) && !o.waiting
	})
}

// check compares the truth (a fresh read-only open on the objects, no
// faults) with every ack, trim and view so far.
func (w *simWorld) check() {
	w.mu.Lock()
	if w.mut == w.canonMut && w.step > 1 {
		w.mu.Unlock()
		return
	}
	w.canonMut = w.mut
	w.mu.Unlock()
	ctx := context.Background()
	direct, err := NewStore(directStorage{w}, Options{Driver: "sim-check", NewID: w.newID, CacheBytes: -1})
	if err != nil {
		panic(err)
	}
	defer direct.Close()
	st, err := direct.Open(ctx, simStream, stream.OpenOptions{Mode: stream.ModeReadOnly})
	var bs []stream.Batch
	start, inc := int64(0), ""
	deleted := errors.Is(err, stream.ErrNotFound)
	if deleted {
		err = nil
	}
	if err == nil && !deleted {
		inc = st.Driver().(*reader).l.inc
		start = st.StartOffset()
		from := start
		for {
			var got []stream.Batch
			got, err = st.Fetch(ctx, from, stream.NoEnd, 0)
			if err != nil || len(got) == 0 {
				break
			}
			bs = append(bs, got...)
			from = got[len(got)-1].EndOffset()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.violate("the truth is unreadable: %v", err)
		return
	}
	if inc != w.canonInc {
		// A Delete took effect (and maybe an open recreated the stream).
		if w.canonInc != "" {
			w.gone[w.canonInc] = true
		}
		if w.gone[inc] {
			w.violate("deleted incarnation %s is back", inc)
		}
		w.logf("a fresh reader now sees incarnation %q", inc)
		w.canonInc = inc
	}
	if deleted {
		return
	}
	// R5: the start never moves back, also across trims that failed
	// (their manifests may land) and the sessions that wrote them.
	if prev, ok := w.starts[inc]; ok && start < prev {
		w.violate("the start offset moved back from %d to %d", prev, start)
	}
	w.starts[inc] = max(w.starts[inc], start)
	w.checkView("a fresh reader", inc, bs, start, nil)
	byOff := map[int64]stream.Batch{}
	for _, b := range bs {
		byOff[b.BaseOffset] = b
	}
	for _, a := range w.acks {
		if a.inc != inc || a.end <= start {
			continue
		}
		b, ok := byOff[a.off]
		if !ok || !bytes.Equal(b.Payload, a.payload) || b.EndOffset() != a.end {
			got := "nothing"
			if ok {
				got = simAppendID(b.Payload)
			}
			w.violate("acked %s at [%d, %d) lost: a fresh reader sees %s there (start %d)", a.id, a.off, a.end, got, start)
		}
	}
	for _, tr := range w.trims {
		if tr.inc == inc && start < tr.to {
			w.violate("Trim(%d) by p%d returned but the start offset is %d", tr.to, tr.proc, start)
		}
	}
}

// finish ends the schedule: every process is gone, every operation fails,
// every goroutine exits.
func (w *simWorld) finish() {
	w.mu.Lock()
	w.shutdown = true
	for _, p := range w.procs {
		p.crashed = true
	}
	for _, op := range w.ops {
		if op.waiting {
			op.waiting = false
			op.err = fmt.Errorf("%w: simulation over", stream.ErrUnavailable)
		}
		op.release()
	}
	w.ops = nil
	procs := slices.Clone(w.procs)
	w.mu.Unlock()
	for _, p := range procs {
		w.mu.Lock()
		p.closeApps()
		w.mu.Unlock()
		go p.store.Close()
	}
	synctest.Wait()
}

// TestSimulationCatchesBrokenRules runs the simulation against engines
// with one protocol rule switched off and asserts that it finds a
// violation: the simulation can fail.
func TestSimulationCatchesBrokenRules(t *testing.T) {
	cases := []struct {
		rule   string
		broken brokenRules
		slow   bool // needs more than a few hundred schedules: not with -short
	}{
		{"R1 own writes by put id", brokenRules{ownBySession: true}, false},
		{"R2 GC by manifest", brokenRules{gcByOffset: true}, true},
		{"R3 ack after probing the next manifest", brokenRules{noAckProbe: true}, true},
		{"R4 walks end by probing the next manifest", brokenRules{noWalkProbe: true}, false},
		{"R6 never re-place over a valid chunk", brokenRules{replaceValid: true}, true},
		{"R7 walks seeded with the chain's session", brokenRules{seedWithOwner: true}, false},
	}
	budget := 3000
	if *simRunsFlag > 0 {
		budget = *simRunsFlag
	}
	for _, c := range cases {
		if c.slow && testing.Short() {
			continue // -short keeps the package's -race run brief; the full run checks every rule
		}
		t.Run(c.rule, func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(budget); seed++ {
				res := runScheduleWith(t, seed, 400, false, c.broken)
				if res.violation != "" {
					t.Logf("without %s: seed %d, step %d: %s", c.rule, seed, res.step, res.violation)
					return
				}
			}
			t.Errorf("without %s: %d schedules found no violation", c.rule, budget)
		})
	}
}
