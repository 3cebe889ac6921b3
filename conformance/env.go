package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// env is what a case runs with: its T, the harness, a seeded RNG, stream
// names of its own, and helpers that fail the case with a clear message.
type env struct {
	t      T
	h      Harness
	c      Case
	seed   int64
	rng    *mrand.Rand
	prefix string
	info   stream.Info
	ctx    context.Context
	engine bool // a store of the case is a *chunked.Store (in process)

	// restart starts the backend again after stopBackend (fault family).
	restart func()
}

// runCase sets up the env of c and runs it on t.
func runCase(t T, h Harness, c Case, seed int64, run string) {
	t.Helper()
	e := &env{
		t: t, h: h, c: c, seed: seed,
		rng:    mrand.New(mrand.NewPCG(uint64(seed), nameHash(c.FullName()))),
		prefix: "conformance/" + run + "/" + c.FullName(),
		ctx:    t.Context(),
	}
	if c.Randomised {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("randomised case failed with seed %d: replay with STRATA_SEED=%d (go test) or --seed %d --run '^%s$' (strata conformance)",
					seed, seed, seed, c.FullName())
			}
		})
	}
	if fencingCase(c) {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s", e.fencingHint())
			}
		})
	}
	c.run(e)
}

// fencingCase reports whether c checks fencing: its failure on the chunked
// engine most often means a Storage that storagetest would refuse.
func fencingCase(c Case) bool {
	return c.Family == FamilyFencing || c.FullName() == FamilyLinearizability+"/takeovers"
}

// fencingHint is logged when a fencing case fails: on the chunked engine,
// fencing is only as good as the Storage's put-if-absent.
func (e *env) fencingHint() string {
	who := "If this store runs on the chunked engine (chunked.NewStore), its"
	if e.engine {
		who = "This store runs on the chunked engine: its"
	}
	return who + " fencing rests on the chunked.Storage: PutIfAbsent must let exactly one of racing writers in any process win, durable on return, " +
		"and Get, Stat and List must never report an unreachable backend as a missing key. " +
		"Run the Storage suite, storagetest.Run (conformance/storagetest), on the Storage: it checks exactly that (docs/writing-a-driver.md)"
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// --- stores and sessions ---------------------------------------------------

// store opens a store for the case (Harness.NewStore) and closes it when the
// case ends.
func (e *env) store() *stream.Store {
	e.t.Helper()
	s := e.h.NewStore(e.t)
	if s == nil {
		e.t.Fatalf("Harness.NewStore returned nil")
	}
	e.info = s.Info()
	e.noteEngine(s)
	e.closeLater(s)
	return s
}

// noteEngine records whether s runs on the chunked engine in this process.
func (e *env) noteEngine(s *stream.Store) {
	if _, ok := s.Driver().(*chunked.Store); ok {
		e.engine = true
	}
}

// A crashed store is closed too, once the case is over: in-process its
// abandoned sessions and clients would otherwise run on (a real crash ends
// them with its process); out of process its driver is dead and Close only
// releases the host's side.
func (e *env) closeLater(s *stream.Store) {
	e.t.Cleanup(func() { _ = s.Close() })
}

// needSecond skips the case when the harness has no Second hook.
func (e *env) needSecond() {
	e.t.Helper()
	if e.h.Second == nil {
		e.t.Skipf("Harness.Second is nil: the harness declares no second store")
	}
}

// second opens an independent store on s's namespace (Harness.Second).
func (e *env) second(s *stream.Store) *stream.Store {
	e.t.Helper()
	e.needSecond()
	s2 := e.h.Second(e.t, s)
	if s2 == nil {
		e.t.Fatalf("Harness.Second returned nil")
	}
	e.noteEngine(s2)
	e.closeLater(s2)
	return s2
}

// needCrash skips the case when the harness cannot crash a store in a way
// that keeps acknowledged data by the driver's declared capabilities.
func (e *env) needCrash(s *stream.Store) {
	e.t.Helper()
	if e.h.Crash == nil {
		e.t.Skipf("Harness.Crash is nil: the harness declares no crash hook")
	}
	if e.h.CrashKillsProcess && !s.Info().Durable {
		e.t.Skipf("driver %q declares Durable=false and the harness's Crash kills its process: acked data is lost by design", s.Info().Driver)
	}
}

// crash crashes s (Harness.Crash) and returns the new store.
func (e *env) crash(s *stream.Store) *stream.Store {
	e.t.Helper()
	e.needCrash(s)
	s2 := e.h.Crash(e.t, s)
	if s2 == nil {
		e.t.Fatalf("Harness.Crash returned nil")
	}
	e.closeLater(s2)
	return s2
}

// needReadOnly skips the case when the driver declares no read-only opens.
func (e *env) needReadOnly(s *stream.Store) {
	e.t.Helper()
	if !s.Info().ReadOnlyOpen {
		e.t.Skipf("driver %q declares ReadOnlyOpen=false", s.Info().Driver)
	}
}

// readerSetup is the start of the read-only cases: a store with a writer
// session (epoch 1) on a stream, and a second store for readers.
func (e *env) readerSetup() (s1, s2 *stream.Store, name string, w *stream.Stream) {
	e.t.Helper()
	s1 = e.store()
	e.needReadOnly(s1)
	s2 = e.second(s1)
	name = e.name("s")
	return s1, s2, name, e.open(s1, name, 1)
}

// takeover is the start of the two-writer fencing cases: a session at
// oldEpoch on one store acks n batches, then a session at newEpoch opens
// on a second store.
func (e *env) takeover(tag string, n int, oldEpoch, newEpoch uint64) (old, cur *stream.Stream, s2 *stream.Store, acks []acked) {
	e.t.Helper()
	s1 := e.store()
	e.needSecond()
	name := e.name("s")
	old = e.open(s1, name, oldEpoch)
	acks = e.appendMany(old, tag, n, 100)
	s2 = e.second(s1)
	return old, e.open(s2, name, newEpoch), s2, acks
}

// name returns a stream name of this case.
func (e *env) name(suffix string) string { return e.prefix + "/" + suffix }

// open opens name read-write at epoch, creating it if missing, and closes
// the session when the case ends.
func (e *env) open(s *stream.Store, name string, epoch uint64) *stream.Stream {
	e.t.Helper()
	st, err := s.Open(e.ctx, name, stream.OpenOptions{Epoch: epoch, CreateIfMissing: true})
	if err != nil {
		e.t.Fatalf("open %q epoch %d: %v", name, epoch, err)
	}
	e.closeStreamLater(st)
	return st
}

// openRO opens name read-only and closes the session when the case ends.
func (e *env) openRO(s *stream.Store, name string) *stream.Stream {
	e.t.Helper()
	st, err := s.Open(e.ctx, name, stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		e.t.Fatalf("open %q read-only: %v", name, err)
	}
	e.closeStreamLater(st)
	return st
}

func (e *env) closeStreamLater(st *stream.Stream) {
	e.t.Cleanup(func() { _ = st.Close() })
}

// --- batches -----------------------------------------------------------------

// payload returns deterministic bytes for (tag, i): a readable header, then
// pseudo-random filler up to size bytes (at least the header).
func payload(tag string, i, size int) []byte {
	head := fmt.Sprintf("%s#%d:", tag, i)
	if size < len(head) {
		size = len(head)
	}
	p := make([]byte, size)
	copy(p, head)
	r := mrand.New(mrand.NewPCG(nameHash(tag), uint64(i)))
	for j := len(head); j < size; j++ {
		p[j] = byte(r.Uint32())
	}
	return p
}

// batch returns the i-th batch of tag: Count 1..3, a timestamp, one
// property, and a payload of size bytes.
func batch(tag string, i, size int) stream.Batch {
	return stream.Batch{
		Count:      uint32(1 + i%3),
		Timestamp:  1_700_000_000_000 + int64(i),
		Properties: map[string]string{"tag": tag},
		Payload:    payload(tag, i, size),
	}
}

// acked is an acknowledged append: the batch and the offset it got.
type acked struct {
	Base  int64
	Batch stream.Batch
}

// appendOK appends b and waits; any error fails the case.
func (e *env) appendOK(st *stream.Stream, b stream.Batch) acked {
	e.t.Helper()
	r, err := stream.Append(e.ctx, st, b)
	if err != nil {
		e.t.Fatalf("append to %q at next offset %d: %v", st.Name(), st.NextOffset(), err)
	}
	if r.NextOffset != r.BaseOffset+int64(b.Count) {
		e.t.Fatalf("append to %q: result base %d next %d, count %d", st.Name(), r.BaseOffset, r.NextOffset, b.Count)
	}
	return acked{Base: r.BaseOffset, Batch: b}
}

// appendMany appends n batches of tag pipelined (all in flight before the
// first wait) and checks that they got contiguous offsets from the stream's
// next offset in call order.
func (e *env) appendMany(st *stream.Stream, tag string, n, size int) []acked {
	e.t.Helper()
	from := st.NextOffset()
	futs := make([]*stream.AppendFuture, n)
	bs := make([]stream.Batch, n)
	for i := range n {
		bs[i] = batch(tag, i, size)
		futs[i] = st.Append(e.ctx, bs[i])
	}
	return e.waitContiguous(st, futs, bs, from)
}

// waitContiguous waits for futs (in call order, for batches bs) and checks
// that every one succeeded with offsets contiguous from from.
func (e *env) waitContiguous(st *stream.Stream, futs []*stream.AppendFuture, bs []stream.Batch, from int64) []acked {
	e.t.Helper()
	out := make([]acked, len(futs))
	next := from
	for i, f := range futs {
		r, err := f.Wait(e.ctx)
		if err != nil {
			e.t.Fatalf("pipelined append %d of %d (count %d, %d bytes) to %q: %v", i, len(futs), bs[i].Count, len(bs[i].Payload), st.Name(), err)
		}
		if r.BaseOffset != next || r.NextOffset != next+int64(bs[i].Count) {
			e.t.Fatalf("pipelined append %d of %d to %q: got [%d,%d), want [%d,%d) (offsets must be contiguous in call order)", i, len(futs), st.Name(), r.BaseOffset, r.NextOffset, next, next+int64(bs[i].Count))
		}
		next = r.NextOffset
		out[i] = acked{Base: r.BaseOffset, Batch: bs[i]}
	}
	return out
}

// readAll fetches every batch of st from its start offset to its end, page
// by page.
func (e *env) readAll(st *stream.Stream) []stream.Batch {
	e.t.Helper()
	log, err := readFrom(e.ctx, st, st.StartOffset(), 0)
	if err != nil {
		e.t.Fatalf("read %q: %v", st.Name(), err)
	}
	return log
}

// readFrom fetches every batch of st from start on, with maxBytes per fetch,
// until an empty fetch. It checks the pages join up.
func readFrom(ctx context.Context, st *stream.Stream, start int64, maxBytes int) ([]stream.Batch, error) {
	var log []stream.Batch
	next := start
	for {
		bs, err := st.Fetch(ctx, next, stream.NoEnd, maxBytes)
		if err != nil {
			return log, fmt.Errorf("fetch %q from %d: %w", st.Name(), next, err)
		}
		if len(bs) == 0 {
			return log, nil
		}
		if bs[0].BaseOffset > next || bs[0].EndOffset() <= next {
			return log, fmt.Errorf("fetch %q from %d: first batch [%d,%d) does not hold offset %d", st.Name(), next, bs[0].BaseOffset, bs[0].EndOffset(), next)
		}
		for i := 1; i < len(bs); i++ {
			if bs[i].BaseOffset != bs[i-1].EndOffset() {
				return log, fmt.Errorf("fetch %q from %d: batch %d at %d does not follow [%d,%d)", st.Name(), next, i, bs[i].BaseOffset, bs[i-1].BaseOffset, bs[i-1].EndOffset())
			}
		}
		log = append(log, bs...)
		next = bs[len(bs)-1].EndOffset()
	}
}

// checkHolds fails the case unless log holds every acked batch at its
// offset with the same count, timestamp, properties and bytes.
func (e *env) checkHolds(what string, log []stream.Batch, acks []acked) {
	e.t.Helper()
	if err := holds(log, acks); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func holds(log []stream.Batch, acks []acked) error {
	at := make(map[int64]stream.Batch, len(log))
	for _, b := range log {
		at[b.BaseOffset] = b
	}
	for _, a := range acks {
		b, ok := at[a.Base]
		if !ok {
			return fmt.Errorf("acked batch %q at offset %d is missing (acked data lost)", headOf(a.Batch.Payload), a.Base)
		}
		if err := sameBatch(b, a.Batch); err != nil {
			return fmt.Errorf("batch at acked offset %d: %v", a.Base, err)
		}
	}
	return nil
}

// sameBatch compares the stored fields of two batches (not BaseOffset).
func sameBatch(got, want stream.Batch) error {
	switch {
	case got.Count != want.Count:
		return fmt.Errorf("count %d, want %d", got.Count, want.Count)
	case got.Timestamp != want.Timestamp:
		return fmt.Errorf("timestamp %d, want %d", got.Timestamp, want.Timestamp)
	case !bytes.Equal(got.Payload, want.Payload):
		at := 0
		for at < len(got.Payload) && at < len(want.Payload) && got.Payload[at] == want.Payload[at] {
			at++
		}
		return fmt.Errorf("payload %q (%d bytes) differs from the acked %q (%d bytes) from byte %d on", headOf(got.Payload), len(got.Payload), headOf(want.Payload), len(want.Payload), at)
	case len(got.Properties) != len(want.Properties):
		return fmt.Errorf("properties %v, want %v", got.Properties, want.Properties)
	}
	for k, v := range want.Properties {
		if got.Properties[k] != v {
			return fmt.Errorf("properties %v, want %v", got.Properties, want.Properties)
		}
	}
	return nil
}

// headOf is the readable header of a payload made by payload().
func headOf(p []byte) string {
	if i := bytes.IndexByte(p, ':'); i >= 0 && i < 64 {
		return string(p[:i])
	}
	if len(p) > 16 {
		return fmt.Sprintf("%x...", p[:16])
	}
	return fmt.Sprintf("%x", p)
}

// contiguous checks that log's batches follow each other.
func contiguous(log []stream.Batch) error {
	for i := 1; i < len(log); i++ {
		if log[i].BaseOffset != log[i-1].EndOffset() {
			return fmt.Errorf("batch %d at offset %d does not follow [%d,%d)", i, log[i].BaseOffset, log[i-1].BaseOffset, log[i-1].EndOffset())
		}
	}
	return nil
}

// sameLog compares two reads of one stream batch by batch.
func sameLog(a, b []stream.Batch) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d batches vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i].BaseOffset != b[i].BaseOffset {
			return fmt.Errorf("batch %d at offset %d vs %d", i, a[i].BaseOffset, b[i].BaseOffset)
		}
		if err := sameBatch(a[i], b[i]); err != nil {
			return fmt.Errorf("batch at offset %d: %v", a[i].BaseOffset, err)
		}
	}
	return nil
}

// wantErr fails the case unless err matches want (errors.Is).
func (e *env) wantErr(what string, err, want error) {
	e.t.Helper()
	if !errors.Is(err, want) {
		e.t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// wantOffsets fails the case unless st's start and next offsets are as
// given.
func (e *env) wantOffsets(what string, st *stream.Stream, start, next int64) {
	e.t.Helper()
	if st.StartOffset() != start || st.NextOffset() != next {
		e.t.Fatalf("%s: %q has offsets [%d, %d), want [%d, %d)", what, st.Name(), st.StartOffset(), st.NextOffset(), start, next)
	}
}

// newRand returns a generator seeded from seed (one per goroutine: a
// *rand.Rand is not safe for concurrent use).
func newRand(seed uint64) *mrand.Rand {
	return mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
