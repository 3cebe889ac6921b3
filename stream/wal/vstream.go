package wal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratastream/strata/stream"
)

// claim is one claim of a virtual stream on one of this session's WALs
// (W2): the record that names the WAL, and the stream's acknowledged
// entries there that are not yet in its data stream (the tail, served from
// memory). A claim pins the WAL from pinFrom (W6a) until a record that
// does not name it is known to be V.meta's last.
type claim struct {
	id   id
	w    *writer
	h    *vstream
	from int64

	// guarded by h.mu
	tail      []tailEntry
	tailBytes int
	oldest    time.Time // when the first tail entry was acknowledged

	// guarded by w.mu
	pinFrom int64
}

type tailEntry struct {
	e      *entry
	walOff int64
	own    bool  // e's payload is a copy of its own, not an alias of the WAL batch
	walPos int64 // the writer's acknowledged WAL bytes with e's batch (live tails)
}

// session states of a vstream.
const (
	live   = iota
	broken // a WAL append failed (W7): settle before appending again
	fenced // a newer session owns the stream
	closed
)

// vstream is a read-write session on a virtual stream.
type vstream struct {
	s     *Store
	name  string
	epoch uint64
	meta  *stream.Stream // V.meta, read-write at epoch
	data  *stream.Stream // V.data, read-write at epoch

	// opMu orders what writes V.meta or V.data: claims, settling,
	// compaction, trims and close.
	opMu sync.Mutex
	// dataSuspect: a V.data append failed; reopen it at our epoch before
	// trusting its NextOffset again (W8).
	dataSuspect bool

	mu                sync.Mutex
	settled           *sync.Cond // signalled when inflight drops to 0
	state             int
	why               error // of broken and fenced
	inc               id
	tagged            bool // V.data is dataName(name, inc) (record.tagged)
	start             int64
	next              int64 // offset of the next append (acked + in flight)
	acked             int64 // end of the acknowledged appends: NextOffset
	dataNext          int64 // V.data's NextOffset: V.data holds V below it
	cl                *claim
	inflight          int
	closing           bool      // Close has begun: no new appends
	appendedSincePass bool      // an append was admitted since the last compaction pass
	retry             []*queued // taken back from ended WALs, waiting for settle
	recovering        bool
	lastStart         int64 // start of the last record written (monotonic, R5-like)
}

func (s *Store) newHandle(name string, epoch uint64, meta, data *stream.Stream) *vstream {
	h := &vstream{s: s, name: name, epoch: epoch, meta: meta, data: data}
	h.settled = sync.NewCond(&h.mu)
	return h
}

// Name is the virtual stream's name.
func (h *vstream) Name() string { return h.name }

// Epoch is the epoch the session opened with.
func (h *vstream) Epoch() uint64 { return h.epoch }

// StartOffset is the first offset that may be fetched.
func (h *vstream) StartOffset() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.start
}

// NextOffset is the end of the acknowledged appends.
func (h *vstream) NextOffset() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acked
}

// stateErr is the error of a session that may not append, or nil.
func (h *vstream) stateErrLocked() error {
	switch {
	case h.state == fenced:
		return h.why
	case h.state == closed || h.closing:
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, h.name)
	}
	return nil
}

// fenceLocal ends the session because a newer one (or a Delete) owns the
// stream. In-flight appends still complete: what lands before the newer
// session reads the WAL is in its log.
func (h *vstream) fenceLocal(why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != closed {
		h.state, h.why = fenced, why
	}
}

// waitSettled waits until no append of the session is in flight.
func (h *vstream) waitSettled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.inflight > 0 {
		h.settled.Wait()
	}
}

// markBroken records that the WAL the session is claimed on ended (W7).
func (h *vstream) markBroken(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == live {
		h.state, h.why = broken, err
	}
}

// Append queues b for the session's WAL. It claims the WAL first when the
// stream has no claim (after open, a park, or a failed WAL), which waits
// for one V.meta append: admission, bounded by ctx.
//
// A checksum the caller supplied (PayloadChecksumSet; sharedlog derives it
// from the Kafka CRC it checked) is taken unread: the copy into the WAL
// batch is checked against it (encodeWALBatchInto). A wrong one is then
// treated as a buffer the caller changed before its append completed: the
// batch is stored, every read of it fails ErrCorrupt (the contract's
// second choice for a wrong supplied checksum) and compaction of its
// stream stops there; no other stream's batch is affected. Unsupplied,
// the payload is checksummed here.
func (h *vstream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	crc := b.PayloadChecksum
	if !b.PayloadChecksumSet {
		crc = stream.Checksum(b.Payload)
	}
	for tries := 0; ; tries++ {
		if err := ctx.Err(); err != nil {
			return stream.FailedAppend(err)
		}
		h.mu.Lock()
		if err := h.stateErrLocked(); err != nil {
			h.mu.Unlock()
			return stream.FailedAppend(err)
		}
		if h.state == live && h.cl != nil {
			e := &entry{claim: h.cl.id, base: h.next, count: b.Count, ts: b.Timestamp, props: b.Properties, payload: b.Payload, crc: crc}
			f, done := stream.NewAppendFuture()
			err := h.cl.w.enqueue(&queued{e: e, h: h, c: h.cl, done: done})
			if err == nil {
				h.next = e.end()
				h.inflight++
				h.appendedSincePass = true
				h.mu.Unlock()
				return f
			}
			// The WAL ended before its streams heard (W7): nothing was
			// queued, so settle and try the new WAL.
			if h.state == live {
				h.state, h.why = broken, err
			}
			if errors.Is(err, stream.ErrClosed) || tries >= maxRetries {
				h.mu.Unlock()
				return stream.FailedAppend(fmt.Errorf("%w: stream %q: %w", stream.ErrUnavailable, h.name, err))
			}
		}
		h.mu.Unlock()
		if err := h.prepare(ctx); err != nil {
			return stream.FailedAppend(err)
		}
	}
}

// Flush (stream.Flusher), with FlushWhenIdle, cuts the session's queued WAL
// appends now, as far as MaxInflightFlushes allows, rather than Linger after
// the last cut: the caller (a broker that started a Produce request's
// appends) has nothing more to add to them. Without FlushWhenIdle it does
// nothing: Linger is then a bound on the WAL batches cut (a billed backend's
// puts), which a hint per request would break.
func (h *vstream) Flush() {
	if !h.s.opts.FlushWhenIdle {
		return
	}
	h.mu.Lock()
	cl := h.cl
	h.mu.Unlock()
	if cl != nil {
		cl.w.cutNow()
	}
}

// ackedItems completes the session's entries of one acknowledged WAL batch.
func (h *vstream) ackedItems(items []*queued, walOff, pos int64) {
	h.mu.Lock()
	for _, q := range items {
		c := q.c
		if len(c.tail) == 0 {
			c.oldest = time.Now()
		}
		c.tail = append(c.tail, tailEntry{e: q.e, walOff: walOff, walPos: pos})
		c.tailBytes += len(q.e.payload)
		if q.e.end() > h.acked {
			h.acked = q.e.end()
		}
	}
	h.mu.Unlock()
	if ackHook != nil {
		ackHook()
	}
	for _, q := range items {
		q.done(stream.AppendResult{BaseOffset: q.e.base, NextOffset: q.e.end()}, nil)
	}
	// Only now are they settled: Close, waiting for in-flight appends,
	// must not return before their futures are done.
	h.doneInflight(len(items))
}

// ackHook, set only by tests, runs between recording an acknowledged WAL
// batch and completing its futures.
var ackHook func()

// doneInflight counts n in-flight appends as completed or taken back.
func (h *vstream) doneInflight(n int) {
	h.mu.Lock()
	h.inflight -= n
	if h.inflight == 0 {
		h.settled.Broadcast()
	}
	h.mu.Unlock()
}

// failedBatch takes back the session's entries of failed WAL batches:
// the WAL they were in ended (W7). They wait, in order, for the session to
// settle, which learns from the fenced WAL which of them landed: those are
// acknowledged, the rest are appended again, at the same offsets, to a
// new WAL (the offsets are never reused in the ended one). Only when
// settling fails do they fail.
func (h *vstream) failedBatch(items []*queued, err error) {
	h.mu.Lock()
	if h.state == fenced || errors.Is(err, stream.ErrClosed) || h.s.opts.broken.noPoison {
		why := h.why
		if h.state != fenced {
			why = fmt.Errorf("%w: stream %q: %w", stream.ErrUnavailable, h.name, err)
			if errors.Is(err, stream.ErrClosed) {
				why = err
			}
		}
		h.mu.Unlock()
		for _, q := range items {
			q.done(stream.AppendResult{}, why)
		}
		h.doneInflight(len(items))
		return
	}
	// Keep them in offset order: the acker fails the queued appends of an
	// ended WAL before its later in-flight batches, and settling
	// re-appends the taken-back entries in this order.
	h.retry = append(h.retry, items...)
	slices.SortFunc(h.retry, func(a, b *queued) int { return cmp.Compare(a.e.base, b.e.base) })
	if h.state == live {
		h.state, h.why = broken, err
	}
	start := !h.recovering
	h.recovering = true
	h.inflight -= len(items) // now in h.retry, which Close settles
	if h.inflight == 0 {
		h.settled.Broadcast()
	}
	h.mu.Unlock()
	if start {
		go h.recover()
	}
}

// recover settles a broken session in the background, so that appends
// taken back by failedBatch complete without waiting for a new append.
func (h *vstream) recover() {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.mu.Lock()
	h.recovering = false
	need := h.state == broken || len(h.retry) > 0
	h.mu.Unlock()
	if need {
		if err := h.settle(ctx); err != nil {
			h.s.log.Debug("wal: settling a stream failed", "stream", h.name, "err", err)
		}
	}
}

// maxRetries bounds how often one append is appended again after failed
// WAL appends before it fails.
const maxRetries = 3

// resolve completes or re-appends the taken-back entries once settling
// has put what landed into V.data, and makes a session that settled
// (settleErr nil) live again in the same step that queues them: an append
// admitted before them would take the offset of the first (two appends
// acknowledged at one offset, and a new owner reading only the first,
// W4). Until then appends wait in prepare for opMu, which the caller
// holds.
func (h *vstream) resolve(ctx context.Context, items []*queued, settleErr error) {
	h.mu.Lock()
	dataNext, state, why := h.dataNext, h.state, h.why
	h.mu.Unlock()
	var rest []*queued
	for _, q := range items {
		if settleErr == nil && q.e.end() <= dataNext {
			q.done(stream.AppendResult{BaseOffset: q.e.base, NextOffset: q.e.end()}, nil)
			continue
		}
		rest = append(rest, q)
	}
	err := settleErr
	switch {
	case len(rest) == 0:
	case state == fenced:
		err = why
	case err != nil:
	case rest[0].e.base != dataNext:
		err = fmt.Errorf("%w: stream %q: append at %d lost its place (the log ends at %d)", stream.ErrUnavailable, h.name, rest[0].e.base, dataNext)
	case rest[0].tries >= maxRetries:
		err = fmt.Errorf("%w: stream %q: the WAL failed %d times under this append", stream.ErrUnavailable, h.name, rest[0].tries)
	default:
		h.mu.Lock()
		claimed := h.cl != nil && h.cl.w.dead() == nil
		h.mu.Unlock()
		if !claimed {
			err = h.claimWAL(ctx)
		}
	}
	h.mu.Lock()
	if settleErr == nil && h.state == broken {
		h.state, h.why = live, nil
	}
	if err == nil {
		for i, q := range rest {
			q.tries++
			q.e.claim, q.c = h.cl.id, h.cl
			if eerr := h.cl.w.enqueue(q); eerr != nil {
				h.state, h.why = broken, eerr
				h.mu.Unlock()
				h.failAll(rest[i:], fmt.Errorf("%w: stream %q: %w", stream.ErrUnavailable, h.name, eerr))
				return
			}
			h.next = q.e.end()
			h.inflight++
		}
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	if !errors.Is(err, stream.ErrFenced) && !errors.Is(err, stream.ErrUnavailable) && !errors.Is(err, stream.ErrClosed) {
		err = fmt.Errorf("%w: stream %q: %w", stream.ErrUnavailable, h.name, err)
	}
	h.failAll(rest, err)
}

func (h *vstream) failAll(items []*queued, err error) {
	for _, q := range items {
		q.done(stream.AppendResult{}, err)
	}
}

// prepare makes the session ready to append: a broken session settles
// (W7 → W3), then a stream without a claim claims the live WAL (W2).
func (h *vstream) prepare(ctx context.Context) error {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	h.mu.Lock()
	state, cl := h.state, h.cl
	h.mu.Unlock()
	switch state {
	case fenced, closed:
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.stateErrLocked()
	case broken:
		return h.settle(ctx)
	}
	if cl != nil {
		return nil
	}
	return h.claimWAL(ctx)
}

// settle brings a broken session back (W7): once its in-flight appends
// are done, it reads what of its claim landed in the ended WAL — by
// fencing that WAL, as any new owner would (W3a) — copies it to V.data
// (W3b) and writes a record that names no WAL. The session's NextOffset
// becomes V.data's. Called with opMu held.
func (h *vstream) settle(ctx context.Context) error {
	h.waitSettled()
	h.mu.Lock()
	cl, state := h.cl, h.state
	h.mu.Unlock()
	var err error
	if cl != nil && state == broken {
		rec := h.recordLocked(kindClaim)
		rec.claim, rec.wal, rec.from = cl.id, cl.w.name, cl.from
		h.mu.Lock()
		redo := len(h.retry) > 0
		h.mu.Unlock()
		err = h.takeOver(ctx, rec, redo)
	}
	h.mu.Lock()
	items := h.retry
	h.retry = nil
	h.mu.Unlock()
	if settleHook != nil {
		settleHook(h)
	}
	h.resolve(ctx, items, err)
	return err
}

// settleHook, set only by tests, runs when a settle took over what its
// ended WAL held and has not yet appended its taken-back entries again.
var settleHook func(h *vstream)

// recordLocked returns a record of the session's current state.
func (h *vstream) recordLocked(kind byte) record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return record{kind: kind, inc: h.inc, compacted: h.dataNext, start: max(h.start, h.lastStart), name: h.name, tagged: h.tagged}
}

// dataName is V.data's base name.
func (h *vstream) dataName() string {
	r := record{name: h.name, inc: h.inc, tagged: h.tagged}
	return r.dataName()
}

// writeRecord appends rec to V.meta and waits. A fenced append fences the
// session. The start a record carries never goes back, even after a
// failed append whose record may have landed.
func (h *vstream) writeRecord(ctx context.Context, rec record) error {
	h.mu.Lock()
	rec.start = max(rec.start, h.lastStart)
	h.lastStart = rec.start
	h.mu.Unlock()
	r, err := stream.Append(ctx, h.meta, stream.Batch{Count: 1, Timestamp: time.Now().UnixMilli(), Payload: rec.encode()})
	if errors.Is(err, stream.ErrFenced) {
		h.fenceLocal(fmt.Errorf("%w: stream %q: %w", stream.ErrFenced, h.name, err))
	}
	if err != nil {
		return fmt.Errorf("stream %q: writing its meta record: %w", h.name, err)
	}
	h.recorded(rec)
	if r.BaseOffset%metaTrimEvery == metaTrimEvery-1 {
		// Only the last record counts: keep V.meta short.
		if err := h.meta.Trim(ctx, r.BaseOffset); err != nil {
			h.s.log.Debug("wal: trimming a meta stream failed", "stream", h.name, "err", err)
		}
	}
	return nil
}

// metaTrimEvery is how many records V.meta grows by between its trims.
const metaTrimEvery = 16

// recorded notes that rec is V.meta's last record or older than it: a
// claim of this session that rec does not name can no longer be named
// (an earlier record that may land lands before rec), so it is released;
// the claim rec names is pinned from rec's WAL offset on (W6a).
func (h *vstream) recorded(rec record) {
	h.s.mu.Lock()
	var drop []*claim
	var keep *claim
	for _, c := range h.s.claims {
		if c.h != h {
			continue
		}
		if c.id == rec.claim && rec.wal != "" {
			keep = c
		} else {
			drop = append(drop, c)
		}
	}
	h.s.mu.Unlock()
	for _, c := range drop {
		h.s.release(c)
	}
	if keep != nil {
		keep.w.mu.Lock()
		keep.pinFrom = rec.from
		keep.w.mu.Unlock()
	}
}

// claimWAL claims the live WAL for the stream's next appends (W2): the
// claim record names the WAL and its acknowledged end, at or below every
// entry the stream will put there. Called with opMu held.
func (h *vstream) claimWAL(ctx context.Context) error {
	w, err := h.s.liveWAL(ctx)
	if err != nil {
		return err
	}
	c := &claim{id: h.s.newID(), w: w, h: h}
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return fmt.Errorf("%w: stream %q: %w", stream.ErrUnavailable, h.name, w.err)
	}
	c.from, c.pinFrom = w.acked, w.acked
	w.claims[c.id] = c // pinned before the record may land
	w.mu.Unlock()
	h.s.mu.Lock()
	h.s.claims[c.id] = c
	h.s.mu.Unlock()
	rec := h.recordLocked(kindClaim)
	rec.claim, rec.wal, rec.from = c.id, w.name, c.from
	if !h.s.opts.broken.noClaim { // W2 off: appends go into a WAL nothing names yet
		err = h.writeRecord(ctx, rec)
	}
	if err != nil {
		h.mu.Lock()
		if h.state == live {
			h.state, h.why = broken, err
		}
		h.mu.Unlock()
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.stateErrLocked(); err != nil {
		return err
	}
	h.cl = c
	return nil
}

// release unpins c: a record that does not name it is V.meta's last.
func (s *Store) release(c *claim) {
	c.w.mu.Lock()
	delete(c.w.claims, c.id)
	c.w.mu.Unlock()
	s.mu.Lock()
	delete(s.claims, c.id)
	s.mu.Unlock()
}

// releaseClaims releases every claim of the session (its stream was
// deleted: no record names them any more).
func (h *vstream) releaseClaims() {
	h.s.mu.Lock()
	var cs []*claim
	for _, c := range h.s.claims {
		if c.h == h {
			cs = append(cs, c)
		}
	}
	h.s.mu.Unlock()
	for _, c := range cs {
		h.s.release(c)
	}
}

// Fetch returns whole batches overlapping [start, end): from V.data below
// dataNext, then from the tail in memory.
func (h *vstream) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if maxBytes <= 0 || maxBytes > h.s.info.MaxFetchBytes {
		maxBytes = h.s.info.MaxFetchBytes
	}
	for attempt := 0; ; attempt++ {
		h.mu.Lock()
		if h.state == closed {
			h.mu.Unlock()
			return nil, fmt.Errorf("%w: stream %q", stream.ErrClosed, h.name)
		}
		vstart, acked, dataNext, data := h.start, h.acked, h.dataNext, h.data
		var tail []tailEntry
		if h.cl != nil {
			tail = h.cl.tail
		}
		h.mu.Unlock()
		if start < vstart || start > acked {
			return nil, fmt.Errorf("%w: stream %q: offset %d outside [%d, %d]", stream.ErrOffsetOutOfRange, h.name, start, vstart, acked)
		}
		end = min(end, acked)
		if start >= end {
			return nil, nil
		}
		out, err := fetchFrom(ctx, h.s, h.name, h.inc, data, dataNext, tail, start, end, maxBytes)
		if err != nil && attempt < 3 && errors.Is(err, stream.ErrOffsetOutOfRange) {
			continue // compaction moved the tail under us
		}
		return out, err
	}
}

// fetchFrom serves [start, end) from V.data below dataNext, then from the
// tail entries (sorted by offset, continuing V.data).
func fetchFrom(ctx context.Context, s *Store, name string, inc id, data *stream.Stream, dataNext int64, tail []tailEntry, start, end int64, maxBytes int) ([]stream.Batch, error) {
	var out []stream.Batch
	size := 0
	if start < dataNext {
		bs, err := data.Fetch(ctx, start, min(end, dataNext), maxBytes)
		if err != nil {
			return nil, fmt.Errorf("stream %q: reading its data stream: %w", name, err)
		}
		stop := min(end, dataNext)
		var vbs []stream.Batch
	runs:
		for _, b := range bs {
			if vbs, err = decodeData(inc, name, b, vbs[:0]); err != nil {
				return nil, err
			}
			for _, vb := range vbs {
				switch {
				case vb.EndOffset() <= start: // a run may begin below start
				case vb.BaseOffset >= stop || (len(out) > 0 && size >= maxBytes):
					break runs
				default:
					out = append(out, vb)
					size += vb.Size()
					start = vb.EndOffset()
				}
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: stream %q: its data stream has nothing at %d below %d", stream.ErrCorrupt, name, start, dataNext)
		}
		if start < min(end, dataNext) || size >= maxBytes {
			return out, nil
		}
	}
	first, _ := slices.BinarySearchFunc(tail, start, func(t tailEntry, off int64) int { return cmp.Compare(t.e.end(), off+1) })
	for _, t := range tail[first:] {
		if t.e.base >= end || (len(out) > 0 && size >= maxBytes) {
			break
		}
		b, err := t.e.verified(name)
		if err != nil {
			return out, err
		}
		out = append(out, b)
		size += b.Size()
	}
	return out, nil
}

// Trim moves the start offset forward with a V.meta record, then trims
// V.data below min(start, what it holds).
func (h *vstream) Trim(ctx context.Context, newStart int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	h.mu.Lock()
	err := h.stateErrLocked()
	// Only a start a record was acknowledged with is durable: a trim
	// whose record failed (lastStart) may not have landed.
	state, acked, cur := h.state, h.acked, h.start
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if newStart > acked {
		return fmt.Errorf("%w: stream %q: trim to %d beyond NextOffset %d", stream.ErrOffsetOutOfRange, h.name, newStart, acked)
	}
	if newStart <= cur {
		// A no-op, but a fenced session must still hear it is fenced:
		// the base's no-op trim of V.meta checks.
		if err := h.meta.Trim(ctx, h.meta.StartOffset()); err != nil {
			if errors.Is(err, stream.ErrFenced) {
				h.fenceLocal(fmt.Errorf("%w: stream %q: %w", stream.ErrFenced, h.name, err))
			}
			return fmt.Errorf("stream %q: %w", h.name, err)
		}
		return nil
	}
	if state == broken {
		if err := h.settle(ctx); err != nil {
			return err
		}
	}
	rec := h.recordLocked(kindTrim)
	rec.start = newStart
	h.mu.Lock()
	if c := h.cl; c != nil {
		rec.claim, rec.wal, rec.from = c.id, c.w.name, c.pinFromLocked()
	}
	h.mu.Unlock()
	if err := h.writeRecord(ctx, rec); err != nil {
		return err
	}
	h.mu.Lock()
	h.start = max(newStart, h.lastStart) // the start the record carried
	start, dataNext := h.start, h.dataNext
	h.mu.Unlock()
	if t := min(start, dataNext); h.data != nil && t > h.data.StartOffset() {
		if err := h.data.Trim(ctx, t); err != nil {
			h.s.log.Debug("wal: trimming a data stream failed; the next trim retries", "stream", h.name, "err", err)
		}
	}
	return nil
}

// pinFromLocked is the WAL offset a record of this claim names now.
func (c *claim) pinFromLocked() int64 {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.pinFrom
}

// Close waits for the session's appends, copies its tail to V.data and
// writes a close record that names no WAL (W5), so that neither the next
// owner nor GC needs this session's WAL for the stream.
func (h *vstream) Close() error {
	h.mu.Lock()
	if h.state == closed || h.closing {
		h.mu.Unlock()
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, h.name)
	}
	h.closing = true
	h.mu.Unlock()
	h.waitSettled()
	h.opMu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.mu.Lock()
	state, retries := h.state, len(h.retry)
	h.mu.Unlock()
	if state == broken || retries > 0 {
		_ = h.settle(ctx) // appends taken back from an ended WAL complete first
		h.waitSettled()
	}
	if h.s.opts.broken.noCloseCopy {
		_ = h.writeRecord(ctx, h.recordLocked(kindClose)) // the tail is not copied
	} else if err := h.compact(ctx, kindClose, nil); err != nil {
		h.s.log.Debug("wal: closing: the tail stays in the WAL for the next owner", "stream", h.name, "err", err)
	}
	cancel()
	h.opMu.Unlock()
	h.mu.Lock()
	h.state = closed
	h.mu.Unlock()
	h.s.mu.Lock()
	if h.s.handles[h.name] == h {
		delete(h.s.handles, h.name)
	}
	h.s.mu.Unlock()
	_ = h.meta.Close()
	if h.data != nil {
		_ = h.data.Close()
	}
	return nil
}
