package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratastream/strata/stream"
)

// openRW opens a read-write session (W2, W3): V.meta read-write at the
// epoch (fencing older sessions' records), its last record, V.data of the
// record's incarnation read-write at the epoch before its NextOffset is
// read (W3a, which fences an older owner's compaction), and, when the
// last record names a WAL, the inherited tail copied into V.data (W3b).
// With no record, a new incarnation opens its V.data at its first copy. The session then holds
// no claim: its first append claims the live WAL.
func (s *Store) openRW(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	mopts := stream.OpenOptions{Epoch: opts.Epoch}
	meta, err := s.base.Open(ctx, metaName(name), mopts)
	if errors.Is(err, stream.ErrNotFound) {
		if !s.internal(name) {
			st, lerr := s.base.Open(ctx, name, stream.OpenOptions{Epoch: opts.Epoch})
			if lerr == nil {
				return st, nil // a legacy stream
			}
			if !errors.Is(lerr, stream.ErrNotFound) {
				return nil, lerr
			}
		}
		if !opts.CreateIfMissing {
			return nil, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
		}
		mopts.CreateIfMissing = true
		meta, err = s.base.Open(ctx, metaName(name), mopts)
	}
	if err != nil {
		return nil, err
	}
	rec, ok, err := lastRecord(ctx, meta)
	if err == nil && ok && rec.name != name {
		err = fmt.Errorf("%w: stream %q: its meta stream holds a record of stream %q", stream.ErrCorrupt, name, rec.name)
	}
	if err != nil {
		_ = meta.Close()
		return nil, err
	}
	// A new incarnation (no record yet) creates its data stream only when
	// a compaction first copies to it, after the record of its first claim
	// has landed: whatever names a data stream names the incarnation that
	// writes it, and no Open ever deletes one (a data stream of another
	// incarnation, left by a Delete that stopped halfway, is another name).
	h := s.newHandle(name, opts.Epoch, meta, nil)
	if !ok {
		h.inc, h.tagged = s.newID(), true
		if hashed(name) { // List reads a long name back from its record
			err = h.writeRecord(ctx, h.recordLocked(kindPark))
		}
	} else {
		h.inc, h.tagged, h.start, h.lastStart = rec.inc, rec.tagged, rec.start, rec.start
		h.data, err = s.base.Open(ctx, h.dataName(), stream.OpenOptions{Epoch: opts.Epoch, CreateIfMissing: true})
		if err == nil {
			h.dataNext = h.data.NextOffset()
			if rec.wal != "" {
				h.opMu.Lock()
				err = h.takeOver(ctx, rec, true)
				h.opMu.Unlock()
			}
		}
	}
	if err == nil && h.start > h.dataNext {
		err = fmt.Errorf("%w: stream %q: start %d beyond its data's end %d", stream.ErrCorrupt, name, h.start, h.dataNext)
	}
	if err != nil {
		_ = h.meta.Close()
		if h.data != nil {
			_ = h.data.Close()
		}
		return nil, err
	}
	n := max(h.next, h.dataNext) // h.next is beyond V.data's end only under noCopy
	h.next, h.acked = n, n
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = h.meta.Close()
		if h.data != nil {
			_ = h.data.Close()
		}
		return nil, stream.ErrClosed
	}
	old := s.handles[name]
	s.handles[name] = h
	s.mu.Unlock()
	if old != nil {
		old.fenceLocal(fmt.Errorf("%w: stream %q: opened again at epoch %d", stream.ErrFenced, name, opts.Epoch))
	}
	return h, nil
}

// lastRecord returns V.meta's last record (ok false if it has none).
func lastRecord(ctx context.Context, meta *stream.Stream) (record, bool, error) {
	n := meta.NextOffset()
	if n == 0 {
		return record{}, false, nil
	}
	bs, err := meta.Fetch(ctx, n-1, n, 0)
	if err != nil {
		return record{}, false, fmt.Errorf("stream %s: reading its last record: %w", meta.Name(), err)
	}
	if len(bs) == 0 {
		return record{}, false, fmt.Errorf("%w: stream %s: no record at %d", stream.ErrCorrupt, meta.Name(), n-1)
	}
	rec, err := decodeRecord(bs[len(bs)-1].Payload)
	if err != nil {
		return record{}, false, fmt.Errorf("stream %s: %w", meta.Name(), err)
	}
	return rec, true, nil
}

// takeOver settles a record that names a WAL: the claim's entries there
// (W3a: the WAL fenced first, unless it is this session's live one and
// the claim's holder here has settled), V.data's NextOffset after a
// fencing reopen when in doubt (W8), the entries that continue V.data
// copied into it (W3b, W4), then a record of its own that no longer
// names rec's claim. Called with opMu held.
func (h *vstream) takeOver(ctx context.Context, rec record, claim bool) error {
	entries, own, err := h.s.inherited(ctx, rec)
	if err != nil {
		return err
	}
	if own {
		// The tail came from a handle of this process, whose compaction
		// may have moved V.data's end since we opened it (even through a
		// session of our epoch that fenced ours): read the end again from
		// a session of our own (W8; simulation seed 225425).
		h.mu.Lock()
		h.dataSuspect = true
		h.mu.Unlock()
	}
	if err := h.refreshData(ctx); err != nil {
		return err
	}
	if h.s.opts.broken.noCopy {
		return h.keepTail(entries)
	}
	if err := h.copyTail(ctx, entries, nil); err != nil {
		return err
	}
	// A settling session that acknowledged more than V.data and the
	// inherited tail hold read V.data's end without a fencing reopen: a
	// newer owner may have moved it (and taken the tail from the WAL).
	// Reopen it at our epoch (W8), which fences us in that case, and copy
	// again; it never lowers what it acknowledged (simulation seed 28188).
	h.mu.Lock()
	stale := h.dataNext < h.acked
	if stale {
		h.dataSuspect = true
	}
	h.mu.Unlock()
	if stale {
		if err := h.refreshData(ctx); err != nil {
			return err
		}
		if err := h.copyTail(ctx, entries, nil); err != nil {
			return err
		}
		h.mu.Lock()
		dataNext, acked := h.dataNext, h.acked
		h.mu.Unlock()
		if dataNext < acked {
			return fmt.Errorf("%w: stream %q: acknowledged to %d, its data stream and WAL tail end at %d", stream.ErrCorrupt, h.name, acked, dataNext)
		}
	}
	h.mu.Lock()
	h.cl = nil
	h.next, h.acked = h.dataNext, h.dataNext
	h.mu.Unlock()
	// A record of our own: a claim of the live WAL when appends are
	// expected (the stream was just taken over, or has appends to
	// redo), else a park.
	if claim {
		if err := h.claimWAL(ctx); err != nil {
			return err
		}
	} else if err := h.writeRecord(ctx, h.recordLocked(kindPark)); err != nil {
		return err
	}
	h.s.mu.Lock()
	c := h.s.claims[rec.claim]
	h.s.mu.Unlock()
	if c != nil {
		h.s.release(c) // a claim of this session, held by an earlier handle
	}
	return nil
}

// keepTail ends takeOver with W3b off (Options.broken.noCopy): the
// inherited tail stays in the old WAL, named by the old record, and the
// session's offsets continue after it; the next claim names only the new
// WAL. Called with opMu held.
func (h *vstream) keepTail(entries []tailEntry) error {
	cont, err := continuation(h.name, h.dataNext, entries, false)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cl, h.next = nil, h.dataNext
	if len(cont) > 0 {
		h.next = cont[len(cont)-1].e.end()
	}
	return nil
}

// inherited returns the entries of rec's claim in rec's WAL, in WAL order,
// and whether it took them from the claim's live holder in this process.
func (s *Store) inherited(ctx context.Context, rec record) ([]tailEntry, bool, error) {
	s.mu.Lock()
	c := s.claims[rec.claim]
	live := s.w
	s.mu.Unlock()
	if c != nil && c.w == live && c.w.dead() == nil {
		// Our own live WAL: settle the claim's holder here and take its
		// tail from memory.
		if c.h != nil {
			c.h.fenceLocal(fmt.Errorf("%w: stream %q: opened again", stream.ErrFenced, c.h.name))
			c.h.waitSettled()
			c.h.mu.Lock()
			tail := append([]tailEntry(nil), c.tail...)
			c.h.mu.Unlock()
			if c.w.dead() == nil {
				return tail, true, nil
			}
		}
	}
	entries, err := s.frozenEntries(ctx, rec)
	return entries, false, err
}

// refreshData reopens V.data at the session's epoch when an append to it
// had an unknown outcome (W8), then reads its NextOffset.
func (h *vstream) refreshData(ctx context.Context) error {
	if (!h.dataSuspect || h.s.opts.broken.noDataFence) && h.data != nil {
		return nil
	}
	data, err := h.s.base.Open(ctx, h.dataName(), stream.OpenOptions{Epoch: h.epoch, CreateIfMissing: true})
	if err != nil {
		if errors.Is(err, stream.ErrFenced) {
			h.fenceLocal(fmt.Errorf("%w: stream %q: %w", stream.ErrFenced, h.name, err))
		}
		return fmt.Errorf("stream %q: reopening its data stream: %w", h.name, err)
	}
	h.mu.Lock()
	old := h.data
	h.data, h.dataNext = data, data.NextOffset()
	h.dataSuspect = false
	h.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// copyTail appends to V.data the entries that continue it exactly (W4:
// entries below its end are skipped, the first gap or overlap ends the
// tail), with the same offsets, and waits for their acks (W3b). Called
// with opMu held.
func (h *vstream) copyTail(ctx context.Context, entries []tailEntry, slots *appendSlots) error {
	h.mu.Lock()
	d, data := h.dataNext, h.data
	h.mu.Unlock()
	todo, err := continuation(h.name, d, entries, h.s.opts.broken.noPrefixStop)
	if err != nil || len(todo) == 0 {
		return err
	}
	runs, err := h.runs(todo)
	if err != nil {
		return err
	}
	futs := make([]*stream.AppendFuture, len(runs))
	bufs := make([]*[]byte, len(runs))
	// recycle hands a run's buffer back once its append completed (the
	// store then holds no reference to it).
	recycle := func(i int) {
		if bufs[i] != nil && futs[i].Completed() {
			runBufs.Put(bufs[i])
		}
	}
	issued := 0
	next := d
	for i := range runs {
		// Issue while a slot is free; the first of none outstanding waits
		// for one (appends outstanding free theirs as this loop waits).
		for issued < len(runs) && slots.take(ctx, issued == i) {
			run := runs[issued]
			slots.yieldToAppends(ctx, h.s)
			// Encoded straight into the engine's chunk where the base
			// builds its batches in place (stream.Filler), else into a
			// buffer of the pool that Append copies from.
			f, ok := data.AppendFill(ctx, runBatch(run), runBytes(run), func(p []byte) uint32 { return fillRun(p, h.inc, run) })
			if !ok {
				bufs[issued] = runBufs.Get().(*[]byte)
				b := encodeRunInto(*bufs[issued], h.inc, run)
				*bufs[issued] = b.Payload
				f = data.Append(ctx, b)
			}
			futs[issued] = f
			issued++
		}
		if issued == i { // ctx is done; V.data holds what was waited for
			h.mu.Lock()
			h.dataNext = next
			h.mu.Unlock()
			return ctx.Err()
		}
		r, err := futs[i].Wait(ctx)
		slots.give()
		recycle(i)
		if err == nil && r.BaseOffset != runs[i][0].base {
			err = fmt.Errorf("%w: stream %q: its data stream put the batch of %d at %d", stream.ErrCorrupt, h.name, runs[i][0].base, r.BaseOffset)
		}
		if err != nil {
			for j := i + 1; j < issued; j++ {
				futs[j].Wait(ctx) // their slots are the pass's
				slots.give()
				recycle(j)
			}
			h.mu.Lock()
			h.dataSuspect = true
			h.dataNext = next
			h.mu.Unlock()
			if errors.Is(err, stream.ErrFenced) {
				h.fenceLocal(fmt.Errorf("%w: stream %q: %w", stream.ErrFenced, h.name, err))
			}
			return fmt.Errorf("stream %q: copying its tail to its data stream: %w", h.name, err)
		}
		next = r.NextOffset
	}
	h.mu.Lock()
	h.dataNext = next
	h.mu.Unlock()
	return nil
}

// runBufs recycles the buffers compaction encodes runs in: a pass copies
// every byte the WAL took once more, and fresh buffers of a megabyte cost
// their clearing besides.
var runBufs = sync.Pool{New: func() any { return new([]byte) }}

// appendSlots bound the V.data appends of a compaction pass in flight at
// once, over all its streams (CompactParallelism); nil: no bound (a
// takeover's or a close's copy).
type appendSlots struct {
	ch chan struct{}
	// yield: each copy first waits while the WAL is busy, up to
	// Options.CompactYield (a pass not behind).
	yield time.Duration
}

func newAppendSlots(n int, yield time.Duration) *appendSlots {
	return &appendSlots{ch: make(chan struct{}, n), yield: yield}
}

// take takes a slot: waiting for one (or ctx) if wait, else only if one is
// free at once.
func (a *appendSlots) take(ctx context.Context, wait bool) bool {
	if a == nil {
		return true
	}
	if !wait {
		select {
		case a.ch <- struct{}{}:
			return true
		default:
			return false
		}
	}
	select {
	case a.ch <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// give returns a slot taken.
func (a *appendSlots) give() {
	if a != nil {
		<-a.ch
	}
}

// yieldToAppends waits, before a copy of a pass that yields, while the
// live WAL is busy (Options.CompactYield).
func (a *appendSlots) yieldToAppends(ctx context.Context, s *Store) {
	if a == nil || a.yield <= 0 {
		return
	}
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	if w != nil {
		w.awaitIdle(ctx, a.yield)
	}
}

// maxRunBytes bounds a V.data run: consecutive virtual batches copied as
// one base batch, which share its framing and its append. At 2 MiB a
// saturating producer's 512 KiB batches go three to a put, not one (two
// would not fit 1 MiB with their framing), which keeps the file system
// out of its slow state at 16 partitions saturating; 4 MiB puts lengthen
// the disk queue the WAL's fdatasyncs wait in more than they save (the
// runs measured: `git log -- docs/streamsets.md`). A fetch from V.data reads a
// whole run, so a consumer catching up with 1 MiB per partition reads up
// to twice what it is sent.
const maxRunBytes = 2 << 20

// runs checks the entries a copy takes and groups them into V.data runs of
// at most maxRunBytes (and the base's MaxBatchBytes); a larger entry is a
// run of its own.
func (h *vstream) runs(todo []tailEntry) ([][]*entry, error) {
	limit := maxRunBytes
	if m := h.s.base.Info().MaxBatchBytes; m > 0 {
		limit = min(limit, m)
	}
	var runs [][]*entry
	size := 0
	for _, t := range todo {
		if _, err := t.e.verified(h.name); err != nil {
			return nil, err
		}
		n := runSize(t.e)
		if len(runs) == 0 || size+n > limit-runHeader {
			runs = append(runs, nil)
			size = 0
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], t.e)
		size += n
	}
	return runs, nil
}

// continuation returns the entries that continue a log ending at d, in
// WAL order (W4).
func continuation(name string, d int64, entries []tailEntry, noStop bool) ([]tailEntry, error) {
	var out []tailEntry
	cur := d
	for _, t := range entries {
		switch e := t.e; {
		case e.end() <= d:
		case e.base < d:
			return nil, fmt.Errorf("%w: stream %q: its data stream ends at %d, inside the batch [%d, %d)", stream.ErrCorrupt, name, d, e.base, e.end())
		case e.base != cur:
			if noStop {
				return nil, fmt.Errorf("%w: stream %q: batch at %d after %d", stream.ErrCorrupt, name, e.base, cur)
			}
			return out, nil
		default:
			out = append(out, t)
			cur = e.end()
		}
	}
	return out, nil
}

// frozenWAL is a WAL of an ended session (another's, or one of ours that a
// failed append ended), fenced and read once for every stream whose tail
// it holds: opening many streams with tails in one WAL reads it once.
type frozenWAL struct {
	ready   chan struct{}
	err     error
	byClaim map[id][]tailEntry
	corrupt []int64 // WAL offsets of batches that failed their checks
	used    time.Time
}

// frozenEntries returns the entries of rec's claim in rec's WAL, fencing
// and reading that WAL once per store (W3a).
func (s *Store) frozenEntries(ctx context.Context, rec record) ([]tailEntry, error) {
	s.mu.Lock()
	f := s.frozen[rec.wal]
	if f == nil {
		f = &frozenWAL{ready: make(chan struct{})}
		s.frozen[rec.wal] = f
		go s.loadFrozen(rec.wal, f)
	}
	f.used = time.Now()
	s.mu.Unlock()
	select {
	case <-f.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	for _, off := range f.corrupt {
		if off >= rec.from {
			// The stream's tail may have entries in that batch.
			return nil, fmt.Errorf("%w: stream %q: WAL %s has a corrupt batch at %d, within the tail from %d", stream.ErrCorrupt, rec.name, rec.wal, off, rec.from)
		}
	}
	var out []tailEntry
	for _, t := range f.byClaim[rec.claim] {
		if t.walOff >= rec.from {
			out = append(out, t)
		}
	}
	return out, nil
}

// frozenLoadTimeout bounds fencing and reading one WAL.
const frozenLoadTimeout = 2 * time.Minute

var frozenLoads sync.Mutex // one WAL read at a time per process bounds memory

func (s *Store) loadFrozen(name string, f *frozenWAL) {
	defer close(f.ready)
	ctx, cancel := context.WithTimeout(context.Background(), frozenLoadTimeout)
	defer cancel()
	f.byClaim, f.corrupt, f.err = s.readWAL(ctx, name)
	if f.err != nil {
		s.mu.Lock()
		if s.frozen[name] == f {
			delete(s.frozen, name) // the next open tries again
		}
		s.mu.Unlock()
	}
}

// readWAL fences the WAL name (W3a) and reads all of it. A batch that
// fails its checks is skipped and its offset returned: it makes the
// streams whose tail reaches it ErrCorrupt, not the others.
func (s *Store) readWAL(ctx context.Context, name string) (map[id][]tailEntry, []int64, error) {
	sid, ok := s.parseWALName(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q is not a WAL name", stream.ErrCorrupt, name)
	}
	frozenLoads.Lock()
	defer frozenLoads.Unlock()
	opts := stream.OpenOptions{Epoch: fenceEpoch}
	if s.opts.broken.noFenceWAL {
		opts = stream.OpenOptions{Mode: stream.ModeReadOnly}
	}
	st, err := s.openWAL(ctx, name, opts)
	readOnly := s.opts.broken.noFenceWAL
	if errors.Is(err, stream.ErrFenced) && !readOnly {
		st, err = s.fencedByAnother(ctx, name)
		readOnly = true
	}
	if errors.Is(err, stream.ErrNotFound) {
		// A sweeper deleted it: it fenced the WAL and then found no last
		// record naming it, so a record naming it landed after the fence,
		// and a claim's entries go to the WAL only after its record is
		// acknowledged: the WAL held none of them. (GC deletes a WAL of
		// its own session only once no claim on it can be named.)
		s.log.Info("wal: a WAL named by a meta record is gone: a sweeper deleted it before the record landed", "wal", name)
		return map[id][]tailEntry{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("wal: fencing WAL %s: %w", name, err)
	}
	defer func() { _ = st.Close() }()
	out := make(map[id][]tailEntry)
	var corrupt []int64
	pos, end := st.StartOffset(), st.NextOffset()
	for pos < end {
		bs, err := st.Fetch(ctx, pos, stream.NoEnd, 0)
		if errors.Is(err, stream.ErrFenced) && !readOnly {
			// Another fencer superseded this session mid-read.
			_ = st.Close()
			if st, err = s.fencedByAnother(ctx, name); err != nil {
				return nil, nil, fmt.Errorf("wal: reading WAL %s: %w", name, err)
			}
			readOnly = true
			continue
		}
		if errors.Is(err, stream.ErrCorrupt) {
			// Find the bad batch one offset at a time (a WAL batch
			// has Count 1).
			if bs, err = st.Fetch(ctx, pos, pos+1, 0); err != nil || len(bs) == 0 {
				s.log.Warn("wal: corrupt WAL batch", "wal", name, "offset", pos, "err", err)
				corrupt = append(corrupt, pos)
				pos++
				continue
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("wal: reading WAL %s at %d: %w", name, pos, err)
		}
		if len(bs) == 0 {
			break
		}
		for _, b := range bs {
			es, err := decodeWALBatch(sid, b.Payload)
			if err != nil {
				s.log.Warn("wal: corrupt WAL batch", "wal", name, "offset", b.BaseOffset, "err", err)
				corrupt = append(corrupt, b.BaseOffset)
			}
			for _, e := range es {
				out[e.claim] = append(out[e.claim], tailEntry{e: e, walOff: b.BaseOffset})
			}
			pos = b.EndOffset()
		}
	}
	return out, corrupt, nil
}

// fencedByAnother opens WAL name read-only after a fencing open or read of
// it failed ErrFenced: another session opened it at fenceEpoch or above
// meanwhile (two brokers taking over the streams of one dead broker fence
// its WAL at once). The WAL is then fenced, as W3a needs before it is
// read (ErrFenced at fenceEpoch means a session at fenceEpoch or above),
// and frozen: nobody appends at fenceEpoch, and its writer, at walEpoch,
// can no longer append.
func (s *Store) fencedByAnother(ctx context.Context, name string) (*stream.Stream, error) {
	return s.openWAL(ctx, name, stream.OpenOptions{Mode: stream.ModeReadOnly})
}

// evictFrozen drops frozen WALs unused for a while.
func (s *Store) evictFrozen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, f := range s.frozen {
		select {
		case <-f.ready:
			if time.Since(f.used) > 30*time.Second {
				delete(s.frozen, name)
			}
		default:
		}
	}
}
