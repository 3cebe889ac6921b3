// Package soak is the fencing soak behind `strata soak`: many owners race
// to open the same streams with increasing (and some stale or equal)
// epochs while each pipelines appends, round after round, optionally with
// the driver process killed mid-round; then an independent verifier reads
// every stream's final log through stores that took no part in the race and
// checks it against every ack the owners received.
//
// It checks the fencing contract of docs/design.md and docs/engine.md: every
// acked append is in the log exactly once, at its acked offset, with its
// bytes; acks of one session come in call order, and none follows a failed
// append of that session; no session of a lower epoch acks anything at or
// beyond the NextOffset that a higher epoch's Open returned; two
// independent readers see the same log. Errors other than ErrFenced (and,
// on a store whose driver was killed, any error) count as unexpected.
//
// The workload (epochs, batch counts and sizes, pauses, which store is
// killed and when) is a function of the seed, so a failing run replays
// with the same seed; the interleaving itself is the scheduler's. It is
// not a benchmark and not a linearizability checker (conformance runs
// porcupine).
package soak

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/stream"
)

// Config describes one soak run. Zero values mean the defaults in
// parentheses.
type Config struct {
	// NewStore opens store number i; every store must see one namespace
	// (for an out-of-process driver each is its own driver process).
	// Stores 0..Hosts-1 are the racing owners'; Hosts and Hosts+1 are the
	// verifier's two independent readers. Required.
	NewStore func(ctx context.Context, i int) (*stream.Store, error)
	// Kill crashes store i's driver process (SIGKILL) in about half the
	// rounds (always in the middle one); nil disables driver kills. A killed store is closed and reopened with NewStore after its
	// round.
	Kill func(i int) error
	// NetFault, if set, is called at the start of every round with the
	// round's random source; it may start a fault between the driver and
	// its backend (cut, delay, reset the connections of a proxy) and
	// returns what it did ("" for nothing) and a function that ends it,
	// called when the round's owners are done. During such a round
	// ErrUnavailable on any store is the fault surfacing, not unexpected.
	NetFault func(round int, rng *rand.Rand) (what string, end func())
	// Hosts is the number of stores the owners share (2).
	Hosts int
	// Streams raced on in every round (4).
	Streams int
	// Owners racing for each stream in every round (4).
	Owners int
	// Rounds of racing opens (10).
	Rounds int
	// Appends is the most pipelined appends of one owner in a round (8).
	Appends int
	// PayloadBytes bounds the random bytes each append's payload carries
	// after its identifying header: 0 to PayloadBytes-1 of them (200).
	// Large values make chunks that take the drivers' large-put paths
	// (the nfs driver's direct writes from 256 KiB).
	PayloadBytes int
	// OpTimeout bounds one owner's whole session (open, appends, close)
	// and the verifier's read of one stream (1 minute); running past it is
	// an unexpected error naming the call, so a hang never goes unnoticed.
	OpTimeout time.Duration
	// Duration, if positive, bounds the racing: no round starts once
	// Duration has passed since the run began, and the verifier then
	// checks the rounds that ran (Report.Rounds). The rounds themselves are
	// the same as without it, so a long soak fits a time budget without
	// being made cheaper.
	Duration time.Duration
	// Seed picks the workload; the same seed replays it.
	Seed uint64
	// Prefix of the stream names ("soak").
	Prefix string
	// Logf, if set, receives progress lines.
	Logf func(format string, args ...any)
	// Release, if set, is called once the run is verified and all its
	// stores are closed, before the leak check: it closes whatever
	// NewStore opened behind the stores (driver processes, a shared
	// store) and may clean up the streams.
	Release func(ctx context.Context, rep *Report)
	// LeakWait, if positive, turns on the leak check: after Release, the
	// run waits up to LeakWait for the goroutine count to fall back to the
	// count before the run and for every child process to be gone; what is
	// left is in Report.Leaks and fails the run. Only for a process that
	// runs nothing else meanwhile (not alongside parallel tests).
	LeakWait time.Duration
}

// Report is the outcome of a run.
type Report struct {
	Seed       uint64
	Rounds     int   // rounds run (fewer than Config.Rounds when Duration ran out)
	Operations int64 // opens, appends, closes and fetches issued
	Faults     int64 // driver processes killed and network faults started
	FaultErrs  int64 // errors the killed drivers surfaced to owners
	Fenced     int64 // opens and appends refused with ErrFenced
	Acked      int64 // appends acknowledged (batches)
	AckedOffs  int64 // offsets those acks cover
	Verified   int64 // acked appends found exactly once, intact, at their offset
	Lost       int64 // acked appends missing from the log
	Duplicated int64 // appends found more than once in a log
	Diverged   int64 // acked offsets holding other bytes, logs that differ between readers, broken offsets
	Violations int64 // fencing and ordering rule breaks seen by the owners or the verifier
	Unexpected int64 // errors other than ErrFenced on a store that was not killed
	// Leaks is what the run left running (checked when Config.LeakWait > 0).
	Leaks Leaks
	// Problems are the first few failures, in words.
	Problems []string
}

// OK reports whether nothing was lost, duplicated, diverged, violated,
// unexpected or leaked.
func (r *Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Diverged == 0 && r.Violations == 0 && r.Unexpected == 0 && !r.Leaks.Found()
}

const maxProblems = 20

// payload header: magic, stream, round, owner, index, epoch.
const (
	magic     = "SOAK"
	headerLen = 4 + 2 + 4 + 2 + 4 + 8
)

// appendID names one append of the workload.
type appendID struct {
	stream, round, owner, index int
}

// ack is one acknowledged append.
type ack struct {
	id      appendID
	base    int64
	count   uint32
	payload []byte
}

// session is one owner's read-write open that succeeded.
type session struct {
	epoch    uint64
	openNext int64 // NextOffset when Open returned
	maxEnd   int64 // end of its highest ack (-1: none)
	owner    string
}

// run is the state of one Run.
type run struct {
	cfg    Config
	rep    Report
	mu     sync.Mutex
	acks   [][]ack     // per stream
	sess   [][]session // per stream
	stores []*stream.Store
	killed []atomic.Bool
	netBad atomic.Bool // a NetFault is active this round
	ops    atomic.Int64
}

func (r *run) problem(counter *int64, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*counter++
	if len(r.rep.Problems) < maxProblems {
		r.rep.Problems = append(r.rep.Problems, fmt.Sprintf(format, args...))
	}
}

func (c *Config) defaults() error {
	if c.NewStore == nil {
		return fmt.Errorf("soak: Config.NewStore is required: %w", stream.ErrInvalidArgument)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Hosts, 2)
	def(&c.Streams, 4)
	def(&c.Owners, 4)
	def(&c.Rounds, 10)
	def(&c.Appends, 8)
	def(&c.PayloadBytes, 200)
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Minute
	}
	if c.Prefix == "" {
		c.Prefix = "soak"
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Run runs the soak and verifies it. The error is for a run that could not
// be carried out (a store that does not open, a verifier read that fails);
// what the run found is in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var base Baseline
	if cfg.LeakWait > 0 {
		base = TakeBaseline()
	}
	rep, err := runAndVerify(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Release != nil {
		cfg.Release(ctx, rep)
	}
	if cfg.LeakWait > 0 {
		rep.Leaks = base.Check(ctx, cfg.LeakWait)
		rep.Problems = append(rep.Problems, rep.Leaks.Problems()...)
	}
	return rep, nil
}

// runAndVerify runs the rounds and the verifier, and closes every store it
// opened.
func runAndVerify(ctx context.Context, cfg Config) (*Report, error) {
	r := &run{
		cfg:    cfg,
		rep:    Report{Seed: cfg.Seed},
		acks:   make([][]ack, cfg.Streams),
		sess:   make([][]session, cfg.Streams),
		stores: make([]*stream.Store, cfg.Hosts),
		killed: make([]atomic.Bool, cfg.Hosts),
	}
	defer func() {
		for _, s := range r.stores {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	for i := range r.stores {
		s, err := cfg.NewStore(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("soak: store %d: %w", i, err)
		}
		r.stores[i] = s
	}
	info := r.stores[0].Info()
	if cfg.Kill != nil && !info.Durable {
		return nil, fmt.Errorf("soak: driver %s is not durable; killing it loses everything by design: %w", info.Driver, stream.ErrInvalidArgument)
	}
	began := time.Now()
	for round := 0; round < cfg.Rounds; round++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cfg.Duration > 0 && time.Since(began) >= cfg.Duration {
			cfg.Logf("--duration %v reached after %d of %d rounds; verifying those", cfg.Duration, round, cfg.Rounds)
			break
		}
		r.rep.Rounds = round + 1
		if err := r.round(ctx, round); err != nil {
			return nil, err
		}
		if (round+1)%max(1, cfg.Rounds/10) == 0 {
			cfg.Logf("round %d/%d: %d operations, %d acked, %d kills", round+1, cfg.Rounds, r.ops.Load(), r.acked(), r.rep.Faults)
		}
	}
	if err := r.verify(ctx); err != nil {
		return nil, err
	}
	r.rep.Operations = r.ops.Load()
	return &r.rep, nil
}

func (r *run) acked() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rep.Acked
}

func (r *run) name(s int) string { return fmt.Sprintf("%s/s%d", r.cfg.Prefix, s) }

// rng returns the random source of one (round, stream, owner); stream -1
// with owner -1 is the round's kill plan, with owner 0xfffe its network
// fault.
func (r *run) rng(round, s, owner int) *rand.Rand {
	return rand.New(rand.NewPCG(r.cfg.Seed, uint64(round)<<32|uint64(s+1)<<16|uint64(owner+1)))
}

// round races every stream's owners once, with at most one driver kill.
func (r *run) round(ctx context.Context, round int) error {
	var wg sync.WaitGroup
	roundAcks := &atomic.Int64{}
	stop := make(chan struct{})
	if r.cfg.Kill != nil {
		plan := r.rng(round, -1, -1)
		if plan.IntN(2) == 0 || round == r.cfg.Rounds/2 { // about half the rounds, at least one
			host := plan.IntN(r.cfg.Hosts)
			after := int64(plan.IntN(r.cfg.Streams*r.cfg.Owners*r.cfg.Appends/4 + 1))
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Kill once the round has its share of acks, or at its end
				// if it never gets them (a crash between rounds, then).
			wait:
				for roundAcks.Load() < after {
					select {
					case <-stop:
						break wait
					case <-time.After(time.Millisecond):
					}
				}
				r.killed[host].Store(true)
				if err := r.cfg.Kill(host); err != nil {
					r.problem(&r.rep.Unexpected, "round %d: killing store %d: %v", round, host, err)
					return
				}
				r.mu.Lock()
				r.rep.Faults++
				r.mu.Unlock()
			}()
		}
	}
	if r.cfg.NetFault != nil {
		what, end := r.cfg.NetFault(round, r.rng(round, -1, 0xfffe))
		if what != "" {
			r.netBad.Store(true)
			r.mu.Lock()
			r.rep.Faults++
			r.mu.Unlock()
		}
		defer func() {
			end()
			r.netBad.Store(false)
		}()
	}
	var owners sync.WaitGroup
	for s := 0; s < r.cfg.Streams; s++ {
		for o := 0; o < r.cfg.Owners; o++ {
			owners.Add(1)
			go func() {
				defer owners.Done()
				r.owner(ctx, round, s, o, roundAcks)
			}()
		}
	}
	owners.Wait()
	close(stop)
	wg.Wait()
	for h := range r.stores {
		if !r.killed[h].Load() {
			continue
		}
		_ = r.stores[h].Close()
		st, err := r.cfg.NewStore(ctx, h)
		if err != nil {
			return fmt.Errorf("soak: reopening store %d after its driver was killed: %w", h, err)
		}
		r.stores[h] = st
		r.killed[h].Store(false)
	}
	return nil
}

// expected sorts an error an owner got: ErrFenced is part of the game, any
// error on a killed store is the fault surfacing, anything else is
// unexpected.
func (r *run) expected(host int, what string, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		r.problem(&r.rep.Unexpected, "%s: no answer within %v: %v", what, r.cfg.OpTimeout, err)
	case errors.Is(err, stream.ErrFenced):
		r.mu.Lock()
		r.rep.Fenced++
		r.mu.Unlock()
	case r.killed[host].Load(), r.netBad.Load() && errors.Is(err, stream.ErrUnavailable):
		r.mu.Lock()
		r.rep.FaultErrs++
		r.mu.Unlock()
	default:
		r.problem(&r.rep.Unexpected, "%s: %v", what, err)
	}
}

// owner opens stream s at an epoch of this round (sometimes a stale one)
// and pipelines appends, recording what was acked.
func (r *run) owner(ctx context.Context, round, s, o int, roundAcks *atomic.Int64) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	defer cancel()
	rng := r.rng(round, s, o)
	host := (s*r.cfg.Owners + o) % r.cfg.Hosts
	st := r.stores[host]
	ow := r.cfg.Owners
	epoch := uint64(round*ow + 1 + rng.IntN(ow))
	if round > 0 && rng.IntN(8) == 0 {
		epoch = uint64((round-1)*ow + 1 + rng.IntN(ow)) // a stale owner
	}
	who := fmt.Sprintf("round %d stream %s owner %d epoch %d (store %d)", round, r.name(s), o, epoch, host)
	time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
	r.ops.Add(1)
	sess, err := st.Open(ctx, r.name(s), stream.OpenOptions{Epoch: epoch, CreateIfMissing: true})
	if err != nil {
		r.expected(host, who+": open", err)
		return
	}
	me := session{epoch: epoch, openNext: sess.NextOffset(), maxEnd: -1, owner: who}
	n := 1 + rng.IntN(r.cfg.Appends)
	type pending struct {
		a ack
		f *stream.AppendFuture
	}
	var ps []pending
	for i := 0; i < n; i++ {
		count := uint32(1 + rng.IntN(3))
		p := make([]byte, headerLen+rng.IntN(r.cfg.PayloadBytes))
		copy(p, magic)
		binary.BigEndian.PutUint16(p[4:], uint16(s))
		binary.BigEndian.PutUint32(p[6:], uint32(round))
		binary.BigEndian.PutUint16(p[10:], uint16(o))
		binary.BigEndian.PutUint32(p[12:], uint32(i))
		binary.BigEndian.PutUint64(p[16:], epoch)
		for j := headerLen; j < len(p); j++ {
			p[j] = byte(rng.Uint32())
		}
		r.ops.Add(1)
		f := sess.Append(ctx, stream.Batch{Count: count, Timestamp: int64(round), Payload: p})
		ps = append(ps, pending{ack{id: appendID{s, round, o, i}, count: count, payload: p}, f})
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
	}
	failed := false
	var mine []ack
	for _, p := range ps {
		res, err := p.f.Wait(ctx)
		if err != nil {
			if !failed {
				r.expected(host, fmt.Sprintf("%s: append %d", who, p.a.id.index), err)
			}
			failed = true
			continue
		}
		if failed {
			r.problem(&r.rep.Violations, "%s: append %d acked at %d after an earlier append of the session failed", who, p.a.id.index, res.BaseOffset)
		}
		if res.NextOffset != res.BaseOffset+int64(p.a.count) {
			r.problem(&r.rep.Violations, "%s: append %d acked [%d, %d) for a count of %d", who, p.a.id.index, res.BaseOffset, res.NextOffset, p.a.count)
		}
		if res.BaseOffset < me.maxEnd {
			r.problem(&r.rep.Violations, "%s: append %d acked at %d, below the previous ack's end %d (out of call order)", who, p.a.id.index, res.BaseOffset, me.maxEnd)
		}
		a := p.a
		a.base = res.BaseOffset
		mine = append(mine, a)
		me.maxEnd = res.NextOffset
		roundAcks.Add(1)
	}
	r.ops.Add(1)
	closed := make(chan error, 1)
	go func() { closed <- sess.Close() }()
	select {
	case err := <-closed:
		if err != nil && !errors.Is(err, stream.ErrFenced) {
			r.expected(host, who+": close", err)
		}
	case <-ctx.Done():
		r.expected(host, who+": close", ctx.Err())
	}
	r.mu.Lock()
	r.acks[s] = append(r.acks[s], mine...)
	r.sess[s] = append(r.sess[s], me)
	r.rep.Acked += int64(len(mine))
	for _, a := range mine {
		r.rep.AckedOffs += int64(a.count)
	}
	r.mu.Unlock()
}

// readAll reads the whole log of a stream through st.
func (r *run) readAll(ctx context.Context, st *stream.Store, name string, epoch uint64) ([]stream.Batch, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	defer cancel()
	opts := stream.OpenOptions{Mode: stream.ModeReadOnly}
	if !st.Info().ReadOnlyOpen {
		opts = stream.OpenOptions{Epoch: epoch}
	}
	r.ops.Add(1)
	s, err := st.Open(ctx, name, opts)
	if errors.Is(err, stream.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("soak: verifier open %s: %w", name, err)
	}
	defer s.Close()
	var out []stream.Batch
	next := s.StartOffset()
	for {
		r.ops.Add(1)
		bs, err := s.Fetch(ctx, next, stream.NoEnd, 0)
		if err != nil {
			return nil, fmt.Errorf("soak: verifier fetch %s at %d: %w", name, next, err)
		}
		if len(bs) == 0 {
			return out, nil
		}
		for _, b := range bs {
			b.Payload = bytes.Clone(b.Payload)
			out = append(out, b)
		}
		next = bs[len(bs)-1].EndOffset()
	}
}

// verify reads every stream through two stores that took no part in the
// race and checks the logs against the acks and the sessions.
func (r *run) verify(ctx context.Context) error {
	var readers []*stream.Store
	for i := 0; i < 2; i++ {
		st, err := r.cfg.NewStore(ctx, r.cfg.Hosts+i)
		if err != nil {
			return fmt.Errorf("soak: verifier store %d: %w", i, err)
		}
		defer st.Close()
		readers = append(readers, st)
	}
	for s := 0; s < r.cfg.Streams; s++ {
		name := r.name(s)
		// A verifier without read-only opens fences with an epoch above all.
		top := uint64(r.cfg.Rounds*r.cfg.Owners + 1)
		log, err := r.readAll(ctx, readers[0], name, top)
		if err != nil {
			return err
		}
		again, err := r.readAll(ctx, readers[1], name, top+1)
		if err != nil {
			return err
		}
		if !sameLog(log, again) {
			r.problem(&r.rep.Diverged, "%s: two independent readers see different logs (%d and %d batches)", name, len(log), len(again))
		}
		r.checkStream(s, name, log)
	}
	return nil
}

func sameLog(a, b []stream.Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].BaseOffset != b[i].BaseOffset || a[i].Count != b[i].Count || !bytes.Equal(a[i].Payload, b[i].Payload) {
			return false
		}
	}
	return true
}

func parseID(p []byte) (appendID, bool) {
	if len(p) < headerLen || string(p[:4]) != magic {
		return appendID{}, false
	}
	return appendID{
		stream: int(binary.BigEndian.Uint16(p[4:])),
		round:  int(binary.BigEndian.Uint32(p[6:])),
		owner:  int(binary.BigEndian.Uint16(p[10:])),
		index:  int(binary.BigEndian.Uint32(p[12:])),
	}, true
}

// checkStream checks one stream's final log against its acks and
// sessions.
func (r *run) checkStream(s int, name string, log []stream.Batch) {
	byBase := map[int64]stream.Batch{}
	seen := map[appendID]int{}
	var next int64 = -1
	for _, b := range log {
		if next >= 0 && b.BaseOffset != next {
			r.problem(&r.rep.Diverged, "%s: batch at %d follows one ending at %d", name, b.BaseOffset, next)
		}
		next = b.EndOffset()
		byBase[b.BaseOffset] = b
		id, ok := parseID(b.Payload)
		if !ok || id.stream != s {
			r.problem(&r.rep.Diverged, "%s: batch at %d is not one this soak wrote to the stream", name, b.BaseOffset)
			continue
		}
		seen[id]++
		if seen[id] == 2 {
			r.problem(&r.rep.Duplicated, "%s: append %+v appears more than once (again at %d)", name, id, b.BaseOffset)
		}
	}
	r.mu.Lock()
	acks := r.acks[s]
	sess := append([]session(nil), r.sess[s]...)
	r.mu.Unlock()
	for _, a := range acks {
		b, ok := byBase[a.base]
		switch {
		case !ok:
			r.problem(&r.rep.Lost, "%s: append %+v acked at %d is not in the log", name, a.id, a.base)
		case b.Count != a.count || !bytes.Equal(b.Payload, a.payload):
			r.problem(&r.rep.Diverged, "%s: offset %d was acked for append %+v but holds other bytes", name, a.base, a.id)
		case seen[a.id] == 1:
			r.mu.Lock()
			r.rep.Verified++
			r.mu.Unlock()
		}
	}
	// Fencing: no session acks at or beyond the NextOffset a strictly
	// higher epoch's Open returned.
	sort.Slice(sess, func(i, j int) bool { return sess[i].epoch < sess[j].epoch })
	minAbove := make([]int64, len(sess)+1)
	minAbove[len(sess)] = 1<<63 - 1
	for i := len(sess) - 1; i >= 0; i-- {
		minAbove[i] = min(minAbove[i+1], sess[i].openNext)
	}
	for _, se := range sess {
		j := sort.Search(len(sess), func(k int) bool { return sess[k].epoch > se.epoch })
		if se.maxEnd > minAbove[j] {
			r.problem(&r.rep.Violations, "%s: %s acked up to %d, beyond the NextOffset %d a higher epoch opened at", name, se.owner, se.maxEnd, minAbove[j])
		}
	}
}
