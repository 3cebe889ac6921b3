package chunked

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/stratastream/strata/stream"
)

// writer is a read-write session. One goroutine (run) owns the session's
// protocol state: the chain, the append queue, the chunk puts in flight,
// the ack probes. Append, Trim and Close talk to it over channels; Fetch
// reads the published view (mu). The goroutine runs only while the session
// has work: it parks (exits) once nothing is queued, in flight or waiting
// for it, and the next Append, Trim or Close (or the store's Close) starts
// it again, so an idle stream costs no goroutine.
type writer struct {
	s    *Store
	l    layout
	self sessionKey

	kick     chan struct{} // an append entered the intake
	trims    chan *trimReq // made by the first Trim (w.imu)
	results  chan any      // putResult | probeResult; made at the first put (run only)
	closing  chan struct{}
	done     chan struct{}
	closeOne sync.Once

	mu   sync.Mutex
	view view

	// The intake: appends admitted but not yet taken by the session
	// goroutine, which is woken through kick.
	imu         sync.Mutex
	intake      []*appendReq
	intakeBytes int
	iclosed     bool
	running     bool          // the session goroutine runs (or is about to); false while parked
	waiters     int           // Trims handing a request to the session goroutine
	space       chan struct{} // closed when the intake is taken (backpressure)
	seg         *segment      // the segment Appends encode into, nil after a cut took it
	segHint     int           // capacity of the next segment's batch area

	// Owned by run.
	ch          chain
	queue       []*appendReq
	queuedBytes int
	pending     []*pend
	nextSlot    uint64
	nextBase    int64
	ev          uint64 // event counter ordering confirmations and probes (R3)
	checkedUpTo uint64 // confirmations before this event are cleared by a probe
	probing     bool
	outstanding int // put and probe goroutines not yet reported
	needRewalk  bool
	// acked chunks since the last manifest this session wrote
	sinceManifest int
	failed        error // terminal: ErrFenced, or errDeleted
	isClosing     bool
	timer         *time.Timer
	timerAt       time.Time
}

// view is what Fetch and the offset accessors read.
type view struct {
	start, next int64
	knownV      uint64
	entries     []indexEntry
	err         error
}

type appendReq struct {
	b stream.Batch // Payload aliases seg.buf
	// supplied: the batch's stored checksum derives from sum, the payload
	// checksum the caller supplied (not verified at Append).
	supplied bool
	sum      uint32
	size     int
	seg      *segment
	span     batchSpan // where b is encoded in seg.buf
	at       time.Time
	complete func(stream.AppendResult, error)
}

// segment is a chunk being built: Append encodes each batch straight into
// the segment the next chunk will be put from, behind room for the chunk
// header, so a payload is copied once, at Append (the caller may reuse its
// buffer as soon as Append returns), and checksummed once. A new segment
// starts where the cut's greedy packing would start a new chunk (the next
// batch would pass MaxChunkBytes), when the segment is full (the next one
// gets twice the room), and after a cut took it; the cut seals it with the
// offsets, checksums and header (sealChunk). A cut stops at the end of a
// segment unless it was outgrown. Chunks that are not a whole
// segment's prefix (while segments grow, after a failure, or on a
// re-placement, whose earlier put may still be reading its bytes) are
// copied into a buffer of their own instead.
type segment struct {
	buf  []byte // chunkHeaderLen bytes of room, then the encoded batches
	size int    // Batch.Size of the batches in it
	reqs int    // how many
	// outgrown: Appends moved on for lack of room, not because a chunk
	// ends here; a cut may go on into the next segment (and copy).
	outgrown bool
	copying  sync.WaitGroup // Appends still copying their batch into buf
}

type trimReq struct {
	ctx      context.Context
	newStart int64
	errc     chan error
}

const (
	stInflight = iota
	stConfirmed
	stLost
	stUnknown
)

// pend is one chunk put of the pipeline.
type pend struct {
	slot        uint64
	base, end   int64
	reqs        []*appendReq
	batches     []stream.Batch
	id          putID
	data        []byte
	state       int
	gen         int
	mem         int // bytes the acked batches pin in the cache
	confirmedAt uint64
	err         error
}

type putResult struct {
	p     *pend
	gen   int
	state int
	hdr   chunkHeader
	err   error
}

type probeResult struct {
	v        uint64
	issuedAt uint64
	m        *manifest
	err      error
}

// openCheckpointSlots: an open that walked this many slots past its
// manifest's index checkpoints at once (or Options.CheckpointChunks, when
// smaller).
const openCheckpointSlots = 64

func newWriter(s *Store, l layout, self sessionKey, c chain) *writer {
	w := &writer{
		s: s, l: l, self: self,
		kick:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		ch:       c,
		nextSlot: c.Tail.Seq,
		nextBase: c.Tail.Next,
	}
	// The slots this open walked past its manifest's index are walked again
	// by every later open until a manifest moves the index: they count
	// towards the next checkpoint, and a long walk (a stream whose sessions
	// are short and never trim) checkpoints at the first pump, so that
	// opens do not read ever more of the history.
	walked := int(c.Tail.Seq - c.IdxEnd)
	w.sinceManifest = walked
	if n := s.opts.CheckpointChunks; n > 0 && walked >= min(n, openCheckpointSlots) {
		w.sinceManifest = n
	}
	w.publish()
	if n := s.opts.CheckpointChunks; n > 0 && w.sinceManifest >= n {
		// The checkpoint a long walk calls for is written at once, not
		// at the first append.
		w.running = true
		go w.run()
	}
	return w
}

// wakeLocked starts the session goroutine if it is parked (w.imu held).
func (w *writer) wakeLocked() {
	if !w.running {
		w.running = true
		go w.run()
	}
}

// park ends the session goroutine if the session is idle: nothing queued,
// cut, in flight, admitted or handed over, not closing, the store open
// (the goroutine only; it returns true when the goroutine is to exit).
func (w *writer) park(ctxDone <-chan struct{}) bool {
	if w.isClosing || ctxDone == nil || len(w.queue) > 0 || len(w.pending) > 0 || w.outstanding > 0 {
		return false
	}
	w.imu.Lock()
	defer w.imu.Unlock()
	if len(w.intake) > 0 || w.waiters > 0 || w.iclosed || w.s.ctx.Err() != nil {
		return false
	}
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	// The backing arrays of the emptied pipeline still point at the last
	// chunk's appends, futures and bytes.
	w.pending, w.queue = nil, nil
	w.results = nil // no put or probe is outstanding
	w.running = false
	return true
}

// ---- the stream.DriverStream API ----

func (w *writer) Name() string  { return w.l.name }
func (w *writer) Epoch() uint64 { return w.self.Epoch }

func (w *writer) StartOffset() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.start
}

func (w *writer) NextOffset() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.next
}

// Append, Trim and Fetch run behind the front door (stream.Stream), which
// has checked the batch, the context and the session's closed state.
func (w *writer) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	enc := batchEncodedLen(b)
	supplied := b.PayloadChecksumSet && enc >= combineMin
	if b.PayloadChecksumSet && !supplied {
		// A small batch is checksummed whole at the cut (sealChunk) from
		// its bytes, so the supplied checksum is checked here instead, at
		// the cost of a pass over a few KiB.
		if got := stream.Checksum(b.Payload); got != b.PayloadChecksum {
			return stream.FailedAppend(fmt.Errorf("%w: stream %q: payload checksum %08x, the caller supplied %08x", stream.ErrCorrupt, w.l.name, got, b.PayloadChecksum))
		}
	}
	return w.intakeAppend(ctx, b, len(b.Payload), enc, supplied, nil)
}

// AppendFill implements stream.Filler: fill writes the payload straight
// into the segment, where Append would copy it. A batch below combineMin,
// checksummed whole at the cut, is left to the caller.
func (w *writer) AppendFill(ctx context.Context, b stream.Batch, n int, fill func([]byte) uint32) (*stream.AppendFuture, bool) {
	b.Payload, b.PayloadChecksumSet = nil, false
	enc := batchEncodedLen(b) + n
	if enc < combineMin {
		return nil, false
	}
	return w.intakeAppend(ctx, b, n, enc, true, fill), true
}

// intakeAppend queues b, of n payload bytes and enc encoded, into the open
// segment once the intake has room, and encodes it there: its payload
// copied from b, or written by fill.
func (w *writer) intakeAppend(ctx context.Context, b stream.Batch, n, enc int, supplied bool, fill func([]byte) uint32) *stream.AppendFuture {
	f, complete := stream.NewAppendFuture()
	r := &appendReq{size: b.Size() - len(b.Payload) + n, complete: complete, supplied: supplied, sum: b.PayloadChecksum}
	for {
		w.imu.Lock()
		if w.iclosed {
			w.imu.Unlock()
			return stream.FailedAppend(w.closedErr())
		}
		if w.intakeBytes == 0 || w.intakeBytes+r.size <= w.maxQueuedBytes() {
			e := w.reserve(r, b, n, enc)
			w.intake = append(w.intake, r)
			w.intakeBytes += r.size
			w.wakeLocked()
			w.imu.Unlock()
			// The engine's copy, outside the lock: the caller may reuse
			// b's buffers once Append returns. The cut waits for it.
			if fill == nil {
				r.span.rest = encodeBatchBody(e, b)
			} else {
				r.span.rest, r.sum = encodeBatchFill(e, b, n, fill)
			}
			r.seg.copying.Done()
			select {
			case w.kick <- struct{}{}:
			default:
			}
			return f
		}
		// Backpressure: wait for the session to take the intake.
		if w.space == nil {
			w.space = make(chan struct{})
		}
		space := w.space
		w.imu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return stream.FailedAppend(ctx.Err())
		case <-w.done:
			return stream.FailedAppend(w.closedErr())
		}
	}
}

// reserve places r's encoding (enc bytes) in the open segment, or in a new
// one (w.imu held), and returns where Append is to write it. Segments start small and double while appends queue up
// faster than chunks are cut, up to a whole chunk.
func (w *writer) reserve(r *appendReq, b stream.Batch, n, enc int) []byte {
	limit := w.s.opts.MaxChunkBytes
	seg := w.seg
	if seg != nil && (seg.size+r.size > limit || len(seg.buf)+enc > cap(seg.buf)) {
		if seg.size+r.size <= limit {
			seg.outgrown = true
			w.segHint = min(2*(cap(seg.buf)-chunkHeaderLen), limit+limit/8+4096)
		}
		seg = nil
	}
	if seg == nil {
		seg = &segment{buf: make([]byte, chunkHeaderLen, chunkHeaderLen+max(enc, w.segHint))}
		w.seg = seg
	}
	r.seg, r.span = seg, batchSpan{off: len(seg.buf), n: enc, count: b.Count}
	seg.buf = seg.buf[:len(seg.buf)+enc]
	seg.size += r.size
	seg.reqs++
	seg.copying.Add(1)
	pay := r.span.off + enc - 4 - n
	r.b = stream.Batch{Count: b.Count, Timestamp: b.Timestamp, Properties: maps.Clone(b.Properties),
		Payload: seg.buf[pay : pay+n : pay+n]}
	return seg.buf[r.span.off : r.span.off+enc]
}

// sealSegment stops Appends from adding to seg once a cut took it (or its
// appends failed), and waits for the copies into it.
func (w *writer) sealSegment(seg *segment) {
	w.imu.Lock()
	if w.seg == seg {
		w.seg = nil
		if seg.reqs == 1 && len(w.pending) == 0 {
			// One append at a time (nothing else in flight): the next
			// chunk likely holds one append too, so no room to spare.
			w.segHint = len(seg.buf) - chunkHeaderLen
		}
	}
	w.imu.Unlock()
	seg.copying.Wait()
}

// takeIntake moves admitted appends to the session's queue while it has
// room (the session goroutine only).
func (w *writer) takeIntake() {
	if w.queuedBytes >= w.maxQueuedBytes() && !w.isClosing {
		return
	}
	w.imu.Lock()
	in := w.intake
	w.intake, w.intakeBytes = nil, 0
	if w.space != nil {
		close(w.space)
		w.space = nil
	}
	w.imu.Unlock()
	for _, r := range in {
		w.admit(r)
	}
}

func (w *writer) intakeWaiting() bool {
	w.imu.Lock()
	defer w.imu.Unlock()
	return len(w.intake) > 0
}

// closeIntake stops admissions and fails what was admitted but never taken
// (the session goroutine only, as it exits).
func (w *writer) closeIntake(err error) {
	w.imu.Lock()
	w.iclosed = true
	in := w.intake
	w.intake, w.intakeBytes = nil, 0
	w.imu.Unlock()
	for _, r := range in {
		r.complete(stream.AppendResult{}, err)
	}
}

func (w *writer) closedErr() error {
	return fmt.Errorf("%w: stream %q session %v", stream.ErrClosed, w.l.name, w.self)
}

func (w *writer) Trim(ctx context.Context, newStart int64) error {
	r := &trimReq{ctx: ctx, newStart: newStart, errc: make(chan error, 1)}
	select {
	case <-w.closing:
		return w.closedErr()
	default:
	}
	w.imu.Lock()
	if w.trims == nil {
		w.trims = make(chan *trimReq)
	}
	trims := w.trims
	w.waiters++
	w.wakeLocked()
	w.imu.Unlock()
	select { // a running session goroutine takes up the new channel
	case w.kick <- struct{}{}:
	default:
	}
	defer func() {
		w.imu.Lock()
		w.waiters--
		w.imu.Unlock()
		select { // the goroutine may park now
		case w.kick <- struct{}{}:
		default:
		}
	}()
	select {
	case trims <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.closing:
		return w.closedErr()
	case <-w.done:
		return w.closedErr()
	}
	select {
	case err := <-r.errc:
		return err
	case <-w.done:
		return w.closedErr()
	}
}

func (w *writer) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	select {
	case <-w.closing:
		return nil, w.closedErr()
	default:
	}
	w.mu.Lock()
	v := w.view
	w.mu.Unlock()
	out, err := w.s.fetch(ctx, w.l, v.start, v.next, v.entries, start, end, maxBytes)
	if errors.Is(err, errChunkGone) {
		return nil, w.chunkGone(ctx, start, err)
	}
	return out, err
}

// chunkGone explains a chunk of the session's view that is gone: trimmed
// by this session meanwhile, or by a newer session that fenced this one
// (found by probing the manifest chain); otherwise the data is lost.
func (w *writer) chunkGone(ctx context.Context, start int64, gone error) error {
	w.mu.Lock()
	v := w.view
	w.mu.Unlock()
	if start < v.start {
		return fmt.Errorf("%w: stream %q: offset %d is below the start offset %d", stream.ErrOffsetOutOfRange, w.l.name, start, v.start)
	}
	var newest *manifest
	for ver := v.knownV + 1; ; ver++ {
		m, ok, err := w.s.getManifest(ctx, w.l, ver)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		newest = m
	}
	switch {
	case newest == nil || !w.self.less(newest.Owner):
		return fmt.Errorf("%w: stream %q: %w", stream.ErrCorrupt, w.l.name, gone)
	case start < newest.Start:
		return fmt.Errorf("%w: stream %q: offset %d is below the start offset %d set by session %v", stream.ErrOffsetOutOfRange, w.l.name, start, newest.Start, newest.Owner)
	}
	return fmt.Errorf("%w: stream %q: session %v is fenced by %v: %w", stream.ErrFenced, w.l.name, w.self, newest.Owner, gone)
}

func (w *writer) Close() error {
	first := false
	w.closeOne.Do(func() {
		first = true
		w.imu.Lock()
		w.iclosed = true
		w.wakeLocked()
		w.imu.Unlock()
		close(w.closing)
	})
	<-w.done
	if !first {
		return w.closedErr()
	}
	return nil
}

// ---- the session goroutine ----

// run is the session goroutine: it serves the session until it parks
// (idle) or ends (closed, or the store closed).
func (w *writer) run() {
	if w.serve() {
		return
	}
	w.s.sessionDone(w)
	close(w.done)
}

// serve runs the session's loop; it returns true when the goroutine
// parks, false when the session ended.
func (w *writer) serve() (parked bool) {
	ctx := w.s.ctx
	closing, ctxDone := w.closing, ctx.Done()
	for {
		w.takeIntake()
		if (w.isClosing || ctxDone == nil) && len(w.queue) == 0 && len(w.pending) == 0 && w.outstanding == 0 {
			if w.isClosing && ctxDone != nil && w.failed == nil && w.sinceManifest > 0 && w.s.opts.CheckpointChunks > 0 {
				// A graceful close checkpoints, so that the next open
				// walks from here instead of over every chunk since the
				// last manifest (one GET each).
				w.checkpoint(ctx)
			}
			w.closeIntake(w.closedErr())
			return false
		}
		w.pump(ctx)
		if w.queuedBytes < w.maxQueuedBytes() && w.intakeWaiting() {
			continue // the cuts made room: take more before waiting
		}
		if w.park(ctxDone) {
			return true
		}
		var timerC <-chan time.Time
		if w.timer != nil {
			timerC = w.timer.C
		}
		w.imu.Lock()
		trims := w.trims
		w.imu.Unlock()
		// Results first, so that a replay of the same schedule takes the
		// same path (the simulation test depends on it).
		select {
		case r := <-w.results:
			w.onResult(r)
			continue
		default:
		}
		select {
		case r := <-w.results:
			w.onResult(r)
		case <-w.kick:
		case t := <-trims:
			t.errc <- w.trim(t.ctx, t.newStart)
		case <-timerC:
			w.timer = nil
		case <-closing:
			w.isClosing = true
			closing = nil
		case <-ctxDone:
			ctxDone = nil
			w.fence(fmt.Errorf("%w: stream %q: store closed", stream.ErrClosed, w.l.name))
		}
	}
}

func (w *writer) maxQueuedBytes() int {
	return max(2*w.s.opts.MaxChunkBytes, w.s.opts.MaxBatchBytes)
}

func (w *writer) admit(r *appendReq) {
	if w.failed != nil {
		r.complete(stream.AppendResult{}, w.failed)
		return
	}
	r.at = time.Now()
	w.queue = append(w.queue, r)
	w.queuedBytes += r.size
}

// pump does what the state allows: a re-walk that is due, cutting chunks
// (group commit), and the ack probe.
func (w *writer) pump(ctx context.Context) {
	if w.failed != nil {
		w.failQueue(w.failed)
		return
	}
	if w.needRewalk && len(w.pending) == 0 && w.outstanding == 0 && len(w.queue) > 0 {
		if err := w.rewalk(ctx); err != nil {
			w.failQueue(err)
			return
		}
	}
	if n := w.s.opts.CheckpointChunks; n > 0 && w.sinceManifest >= n {
		w.checkpoint(ctx)
		if w.failed != nil {
			return
		}
	}
	for w.canCut() && len(w.queue) > 0 {
		if !w.lingerOver() {
			break
		}
		w.cut()
	}
	w.maybeProbe()
}

func (w *writer) lingerOver() bool {
	o := w.s.opts
	if o.Linger <= 0 || w.isClosing || w.queuedBytes >= o.MaxChunkBytes {
		return true
	}
	at := w.queue[0].at.Add(o.Linger)
	if !time.Now().Before(at) {
		return true
	}
	if w.timer == nil || !w.timerAt.Equal(at) {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.timer, w.timerAt = time.NewTimer(time.Until(at)), at
	}
	return false
}

func (w *writer) canCut() bool {
	if w.failed != nil || w.needRewalk || len(w.pending) >= w.s.opts.MaxInflightChunks {
		return false
	}
	for _, p := range w.pending {
		if p.state != stInflight && p.state != stConfirmed {
			return false
		}
	}
	return true
}

// cut makes the next chunk from the front of the queue.
func (w *writer) cut() {
	limit := w.s.opts.MaxChunkBytes
	n, size := 0, 0
	for n < len(w.queue) && (n == 0 || size+w.queue[n].size <= limit && (w.queue[n].seg == w.queue[n-1].seg || w.queue[n-1].seg.outgrown)) {
		size += w.queue[n].size
		n++
	}
	reqs := w.queue[:n:n]
	w.queue = w.queue[n:]
	w.queuedBytes -= size
	p := &pend{slot: w.nextSlot, reqs: reqs}
	w.place(p, w.nextSlot, w.nextBase)
	w.nextSlot, w.nextBase = p.slot+1, p.end
	w.pending = append(w.pending, p)
}

// place (re)builds p for slot at base with a fresh put id and starts its
// put.
func (w *writer) place(p *pend, slot uint64, base int64) {
	p.slot, p.base = slot, base
	p.batches = make([]stream.Batch, len(p.reqs))
	off := base
	for i, r := range p.reqs {
		b := r.b
		b.BaseOffset = off
		off += int64(b.Count)
		p.batches[i] = b
	}
	p.end = off
	p.id = w.s.newPutID()
	var spans []batchSpan
	p.data, spans, p.mem = w.chunkBuffer(p)
	sealChunk(p.data, w.l.seed, chunkData, w.self, base, p.id, spans)
	p.state = stInflight
	p.gen++
	w.startPut(p)
}

// chunkBuffer returns the buffer p's chunk is put from, the spans of its
// batches in it, and the memory its batches pin (their segments). On its
// first placement a chunk that is a whole segment's prefix is put from the
// segment itself; otherwise (the chunk's appends do not start a segment,
// or an earlier put of it may still be reading its bytes: a put abandoned
// at OpTimeout runs on) its batches are copied into a new buffer.
func (w *writer) chunkBuffer(p *pend) ([]byte, []batchSpan, int) {
	spans := make([]batchSpan, len(p.reqs))
	mem, whole := 0, p.gen == 0
	var seg *segment
	for i, r := range p.reqs {
		if r.seg != seg {
			seg = r.seg
			w.sealSegment(seg)
			mem += cap(seg.buf)
		}
		spans[i] = r.span
		if i == 0 && r.span.off != chunkHeaderLen || i > 0 && (r.seg != p.reqs[0].seg || r.span.off != spans[i-1].off+spans[i-1].n) {
			whole = false
		}
	}
	if whole {
		end := spans[len(spans)-1].off + spans[len(spans)-1].n
		return p.reqs[0].seg.buf[:end:end], spans, mem
	}
	size := chunkHeaderLen
	for _, sp := range spans {
		size += sp.n
	}
	buf := make([]byte, size)
	off := chunkHeaderLen
	for i, r := range p.reqs {
		copy(buf[off:off+r.span.n], r.seg.buf[r.span.off:r.span.off+r.span.n])
		spans[i].off = off
		off += r.span.n
	}
	return buf, spans, mem
}

// startPut runs p's put-if-absent and, on a collision, reads the winner's
// header (R1: the slot is ours only if it carries this put's id).
func (w *writer) startPut(p *pend) {
	w.outstanding++
	key, data, id, gen := w.l.chunk(p.slot), p.data, p.id, p.gen
	ctx, nextV, results := w.s.ctx, w.ch.KnownV+1, w.resultsChan()
	go func() {
		r := putResult{p: p, gen: gen}
		err := w.s.putIfAbsent(ctx, key, data)
		switch {
		case err == nil:
			r.state = stConfirmed
		case errors.Is(err, stream.ErrAlreadyExists):
			h, ok, err := w.s.getChunkHeader(ctx, w.l, p.slot)
			switch {
			case err != nil:
				r.state, r.err = stUnknown, err
			case !ok:
				// The winner is gone. Only GC deletes chunk slots, and only
				// below the IdxEnd of the manifest that authorised it; this
				// session's own GCs stay below its acked tail. So a newer
				// session's GC removed it (its fence, say), and that
				// session's manifest follows the newest this one knows.
				if m, found, merr := w.s.getManifest(ctx, w.l, nextV); merr == nil && found && w.self.less(m.Owner) {
					r.state, r.hdr = stLost, chunkHeader{Sess: m.Owner}
				} else {
					r.state, r.err = stUnknown, fmt.Errorf("%w: stream %q: %s reported taken but absent", stream.ErrUnavailable, w.l.name, key)
				}
			case h.PutID == id || w.s.opts.broken.ownBySession && h.Sess == w.self:
				r.state = stConfirmed
			default:
				r.state, r.hdr = stLost, h
			}
		default:
			r.state, r.err = stUnknown, err
		}
		results <- r
	}()
}

// resultsChan returns the channel put and probe goroutines report on,
// making it at the first (an idle session never needs it).
func (w *writer) resultsChan() chan any {
	if w.results == nil {
		w.results = make(chan any, w.s.opts.MaxInflightChunks+1)
	}
	return w.results
}

// maybeProbe starts the ack probe (R3) when the head of the pipeline is
// confirmed but not yet cleared by a probe that began after it.
func (w *writer) maybeProbe() {
	if w.probing || w.failed != nil || len(w.pending) == 0 || w.s.opts.broken.noAckProbe {
		return
	}
	h := w.pending[0]
	if h.state != stConfirmed || h.confirmedAt < w.checkedUpTo {
		return
	}
	w.ev++
	w.probing = true
	w.outstanding++
	v, at, ctx, results := w.ch.KnownV+1, w.ev, w.s.ctx, w.resultsChan()
	go func() {
		m, ok, err := w.s.getManifest(ctx, w.l, v)
		r := probeResult{v: v, issuedAt: at, err: err}
		if ok {
			r.m = m
		}
		results <- r
	}()
}

func (w *writer) onResult(r any) {
	w.outstanding--
	switch r := r.(type) {
	case putResult:
		w.onPut(r)
	case probeResult:
		w.onProbe(r)
	}
	w.advance()
}

func (w *writer) onPut(r putResult) {
	p := r.p
	if p.gen != r.gen || p.state != stInflight || !w.isPending(p) {
		return // a put of an earlier placement, or of a failed append
	}
	switch r.state {
	case stConfirmed:
		w.ev++
		p.state, p.confirmedAt = stConfirmed, w.ev
	case stLost:
		if w.self.less(r.hdr.Sess) {
			w.fence(fmt.Errorf("%w: stream %q: slot %s taken by newer session %v", stream.ErrFenced, w.l.name, w.l.chunk(p.slot), r.hdr.Sess))
			return
		}
		p.state = stLost
	case stUnknown:
		p.state, p.err = stUnknown, r.err
	}
}

func (w *writer) onProbe(r probeResult) {
	w.probing = false
	switch {
	case r.err != nil:
		// Confirmed puts cannot be acked without the probe: their outcome
		// is unknown to the caller (they may appear).
		w.fail(0, fmt.Errorf("stream %q: ack probe of %s: %w", w.l.name, w.l.manifest(r.v), r.err))
		w.needRewalk = true
	case r.m == nil:
		if r.v == w.ch.KnownV+1 && r.issuedAt > w.checkedUpTo {
			w.checkedUpTo = r.issuedAt
		}
	case r.m.Kind == manDelete:
		w.fence(deletedFence(w.l))
	case w.self.less(r.m.Owner):
		w.fence(fmt.Errorf("%w: stream %q: manifest %s of session %v is newer than session %v", stream.ErrFenced, w.l.name, w.l.manifest(r.v), r.m.Owner, w.self))
	default:
		// One's own manifest (a trim whose put outcome was unknown), or
		// an older session's: move on to the next version.
		w.ch.KnownV = max(w.ch.KnownV, r.v)
		w.adoptOwn(r.m)
	}
}

func deletedFence(l layout) error {
	return fmt.Errorf("%w: stream %q incarnation %s was deleted", stream.ErrFenced, l.name, l.inc)
}

func (w *writer) isPending(p *pend) bool {
	for _, q := range w.pending {
		if q == p {
			return true
		}
	}
	return false
}

// advance acks the head of the pipeline while it is confirmed and cleared
// (R3), and handles lost and unknown puts.
func (w *writer) advance() {
	if w.failed != nil {
		return
	}
	for len(w.pending) > 0 {
		h := w.pending[0]
		if h.state == stConfirmed && (h.confirmedAt < w.checkedUpTo || w.s.opts.broken.noAckProbe) {
			w.ack(h)
			w.pending = w.pending[1:]
			continue
		}
		if h.state == stUnknown {
			w.fail(0, fmt.Errorf("stream %q: append at offset %d (%s), outcome unknown: %w", w.l.name, h.base, w.l.chunk(h.slot), h.err))
			w.needRewalk = true
		}
		break
	}
	if len(w.pending) == 0 {
		return
	}
	lost, resolved := false, true
	for _, p := range w.pending {
		lost = lost || p.state == stLost
		resolved = resolved && p.state != stInflight
	}
	if !lost || !resolved || w.pending[0].state == stConfirmed {
		return
	}
	for i, p := range w.pending {
		if p.state == stUnknown {
			w.fail(i, fmt.Errorf("stream %q: append at offset %d (%s), outcome unknown: %w", w.l.name, p.base, w.l.chunk(p.slot), p.err))
			break
		}
	}
	if err := w.rewalk(w.s.ctx); err != nil {
		w.fail(0, err)
		w.needRewalk = !errors.Is(err, stream.ErrFenced)
	}
}

// ack completes the appends of h, the confirmed and cleared head.
func (w *writer) ack(h *pend) {
	w.ch.Entries = append(w.ch.Entries, indexEntry{Seq: h.slot, Base: h.base, Count: uint64(h.end - h.base), PutID: h.id})
	w.ch.Tail = tail{Seq: h.slot + 1, Next: h.end, Max: w.self}
	w.sinceManifest++
	var unverified []suppliedSum
	for i, r := range h.reqs {
		if r.supplied {
			unverified = append(unverified, suppliedSum{i: i, crc: r.sum})
		}
	}
	w.s.cache.add(w.l, h.slot, h.id, h.batches, h.mem, unverified)
	w.publish() // before the futures: a Fetch after an ack sees it
	for i, r := range h.reqs {
		b := h.batches[i]
		r.complete(stream.AppendResult{BaseOffset: b.BaseOffset, NextOffset: b.EndOffset()}, nil)
	}
}

// rewalk walks from the acked tail after a lost or unknown put and places
// the pending chunks again at the first free slot. R6: if the walk found a
// valid chunk (one's own late put, say), the pending appends fail instead
// of being placed after it.
func (w *writer) rewalk(ctx context.Context) error {
	res, err := w.s.walk(ctx, w.l, &w.ch, &w.self)
	if errors.Is(err, errDeleted) {
		err = deletedFence(w.l) // a holder of a deleted stream is fenced
	}
	if err != nil {
		if errors.Is(err, stream.ErrFenced) {
			w.fence(err)
		}
		return err
	}
	w.needRewalk = false
	if res.Found > 0 && len(w.pending) > 0 && !w.s.opts.broken.replaceValid {
		w.fail(0, fmt.Errorf("%w: stream %q: a re-walk found valid chunks after the last ack; the unacked appends were not placed again", stream.ErrUnavailable, w.l.name))
	}
	slot, base := w.ch.Tail.Seq, w.ch.Tail.Next
	for _, p := range w.pending {
		w.place(p, slot, base)
		slot, base = slot+1, p.end
	}
	w.nextSlot, w.nextBase = slot, base
	w.publish()
	return nil
}

// fail fails the pending appends from index i on, and every queued one
// (no gaps: later in-flight appends fail with an earlier one).
func (w *writer) fail(i int, err error) {
	for _, p := range w.pending[i:] {
		for _, r := range p.reqs {
			r.complete(stream.AppendResult{}, err)
		}
	}
	w.pending = w.pending[:i]
	w.nextSlot, w.nextBase = w.ch.Tail.Seq, w.ch.Tail.Next
	if len(w.pending) > 0 {
		last := w.pending[len(w.pending)-1]
		w.nextSlot, w.nextBase = last.slot+1, last.end
	}
	w.failQueue(err)
}

func (w *writer) failQueue(err error) {
	if len(w.queue) > 0 {
		w.sealSegment(w.queue[len(w.queue)-1].seg) // later appends start a chunk of their own
	}
	for _, r := range w.queue {
		r.complete(stream.AppendResult{}, err)
	}
	w.queue, w.queuedBytes = nil, 0
}

// fence ends the session: every unacked append fails with err.
func (w *writer) fence(err error) {
	w.fail(0, err)
	w.failed = err
	w.mu.Lock()
	w.view.err = err
	w.mu.Unlock()
	w.s.opts.Logger.Info("chunked: session fenced", "stream", w.l.name, "session", w.self.String(), "err", err)
}

func (w *writer) publish() {
	w.mu.Lock()
	w.view.start, w.view.next, w.view.entries, w.view.knownV = w.ch.Start, w.ch.Tail.Next, w.ch.Entries, w.ch.KnownV
	w.mu.Unlock()
}
