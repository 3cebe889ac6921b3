package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratastream/strata/internal/trusted"
	"github.com/stratastream/strata/stream"
)

// walEpoch is the epoch a session writes its WAL at; fenceEpoch, above it,
// is the epoch anyone else opens a WAL at to fence it (W1). Nobody appends
// to a WAL at fenceEpoch, so fencers may supersede one another freely.
const (
	walEpoch   = 1
	fenceEpoch = 2
)

// queued is one virtual append waiting in, or flushed to, a WAL.
type queued struct {
	e    *entry
	h    *vstream
	c    *claim
	done func(stream.AppendResult, error)
	// tries counts the WALs that failed under this append.
	tries int
}

// flush is one WAL batch in flight.
type flush struct {
	items []*queued
	fut   *stream.AppendFuture
	bytes int64 // the WAL batch's payload size
}

// writer is a session's WAL: the only writer of one base stream (W1). It
// batches the appends of every virtual stream of the session into WAL
// batches (group commit across streams), keeps up to MaxInflightFlushes of
// them in flight, and completes the virtual appends in WAL order. The
// first failed WAL append ends it (W7).
type writer struct {
	s    *Store
	name string
	sid  id
	base *stream.Stream

	mu         sync.Mutex
	queue      []*queued
	queueBytes int
	cutAt      time.Time // when the last WAL batch was cut
	timer      *time.Timer
	inflight   int
	ackedBytes int64 // payload bytes of the batches acknowledged so far
	err        error // set once: the WAL is dead (W7)
	closing    bool  // close has begun: no new appends; those in flight complete
	acked      int64 // end of the acknowledged WAL batches
	trimmed    int64 // the WAL is trimmed below this
	claims     map[id]*claim
	flushes    chan *flush
	ackerDone  chan struct{}
	closedOnce sync.Once
	// busySince is when the WAL last turned busy (something queued or in
	// flight); idleCh, when not nil, is closed when it is idle again
	// (awaitIdle).
	busySince time.Time
	idleCh    chan struct{}
	// kick wakes the idle flusher (FlushWhenIdle): an append to an idle
	// WAL is cut when that goroutine runs, not inline, so that the other
	// appends its caller makes at once (the partitions of one Produce
	// request) go in the same WAL batch.
	kick chan struct{}
}

func newWriter(s *Store, name string, sid id, base *stream.Stream) *writer {
	w := &writer{
		s: s, name: name, sid: sid, base: base,
		acked: base.NextOffset(), trimmed: base.StartOffset(),
		claims:    make(map[id]*claim),
		flushes:   make(chan *flush, s.opts.MaxInflightFlushes+1),
		ackerDone: make(chan struct{}),
	}
	go w.acker()
	if s.opts.FlushWhenIdle {
		w.kick = make(chan struct{}, 1)
		go w.idleFlusher()
	}
	return w
}

// idleFlusher cuts the batches that appends to an idle WAL kicked it for.
func (w *writer) idleFlusher() {
	for range w.kick {
		w.mu.Lock()
		w.maybeFlushLocked()
		w.mu.Unlock()
	}
}

// dead returns the error that ended the WAL, or nil.
func (w *writer) dead() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// ackedEnd returns the end of the acknowledged WAL batches.
func (w *writer) ackedEnd() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// enqueue queues q for the next WAL batch, or fails at once if the WAL is
// dead. Callers hold q.h.mu, so a stream's entries queue in offset order.
func (w *writer) enqueue(q *queued) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closing {
		return fmt.Errorf("%w: WAL %s closed", stream.ErrClosed, w.name)
	}
	if w.idleLocked() {
		w.busySince = time.Now()
	}
	w.queue = append(w.queue, q)
	w.queueBytes += q.e.size()
	if w.kick != nil && w.inflight == 0 && w.queueBytes < w.s.opts.MaxFlushBytes {
		// Group commit without a wait: the flusher cuts once it runs,
		// taking whatever the caller appended meanwhile (a kick already
		// pending covers this append too).
		select {
		case w.kick <- struct{}{}:
		default:
		}
		return nil
	}
	w.maybeFlushLocked()
	return nil
}

// maybeFlushLocked cuts WAL batches while a flush slot is free and the
// queue is due: full, Linger after the last cut, or (FlushWhenIdle)
// nothing is in flight. Linger runs from the last cut, not from the
// oldest queued append: batches are at least Linger apart (at most one
// per Linger, as for a billed backend), and an append to a WAL that cut
// nothing for Linger goes out at once. The acker calls it after every
// acknowledged batch.
func (w *writer) maybeFlushLocked() { w.cutLocked(false) }

// cutNow cuts what is queued at once, Linger or not, while flush slots are
// free (vstream.Flush).
func (w *writer) cutNow() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cutLocked(true)
}

// cutLocked is maybeFlushLocked, with the queue due whatever Linger says
// when hinted.
func (w *writer) cutLocked(hinted bool) {
	for len(w.queue) > 0 && w.inflight < w.s.opts.MaxInflightFlushes && w.err == nil {
		linger := w.s.opts.Linger
		if hinted || w.s.opts.FlushWhenIdle && w.inflight == 0 {
			linger = 0 // hinted, or group commit: nothing to share the wait with
		}
		if w.queueBytes < w.s.opts.MaxFlushBytes && linger > 0 {
			wait := linger - time.Since(w.cutAt)
			if wait > 0 {
				if w.timer == nil {
					w.timer = time.AfterFunc(wait, w.timerFired)
				}
				return
			}
		}
		w.flushLocked()
	}
}

func (w *writer) timerFired() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	w.maybeFlushLocked()
}

// flushLocked encodes up to MaxFlushBytes of the queue as one WAL batch and
// appends it to the base WAL.
func (w *writer) flushLocked() {
	n, size := 0, 0
	for n < len(w.queue) && (n == 0 || size+w.queue[n].e.size() <= w.s.opts.MaxFlushBytes) {
		size += w.queue[n].e.size()
		n++
	}
	items := make([]*queued, n)
	copy(items, w.queue)
	w.queue = w.queue[n:]
	w.queueBytes -= size
	w.cutAt = time.Now()
	entries := make([]*entry, n)
	for i, q := range items {
		entries[i] = q.e
	}
	b := stream.Batch{Count: 1, Timestamp: time.Now().UnixMilli()}
	w.inflight++
	// Encoded straight into the base's own buffer where it writes batches
	// from there (stream.Filler: nfs.LogStore's direct writes), else into
	// a buffer of the batch's own that the base copies or writes.
	total := walBatchHeader + size
	fut, ok := w.base.AppendFill(context.Background(), b, total, func(p []byte) uint32 {
		sum, all := encodeWALBatchInto(p, w.sid, entries)
		if !all {
			sum = stream.Checksum(p)
		}
		return sum
	})
	if !ok {
		payload, sum, all := encodeWALBatch(w.sid, entries)
		b.Payload = payload
		ctx := context.Background()
		if all {
			b.PayloadChecksum, b.PayloadChecksumSet = sum, true
			ctx = checkedCtx
		}
		fut = w.base.Append(ctx, b)
	}
	w.flushes <- &flush{items: items, fut: fut, bytes: int64(total)}
}

// checkedCtx is the context of a WAL append whose supplied checksum is
// its bytes' (encodeWALBatchInto checked the copies): a base store in this
// process (nfs.LogStore) then takes it without reading the batch again.
var checkedCtx = trusted.WithChecksum(context.Background())

// acker completes WAL batches in order. After the first failure every
// later batch fails too, even one the base acknowledges: offsets past a
// possible gap are never acknowledged (W4, W7).
func (w *writer) acker() {
	defer close(w.ackerDone)
	for f := range w.flushes {
		res, err := f.fut.Result()
		w.mu.Lock()
		w.inflight--
		if err == nil && w.err != nil {
			err = w.err
		}
		if err == nil {
			w.acked = res.NextOffset
			w.ackedBytes += f.bytes
			pos := w.ackedBytes
			// The next batch goes out before this one's futures complete:
			// what queued meanwhile need not wait for them.
			w.maybeFlushLocked()
			w.notifyIdleLocked()
			w.mu.Unlock()
			w.ackItems(f.items, res.BaseOffset, pos)
			continue
		}
		first := w.err == nil
		if first {
			if w.s.opts.broken.noPoison && !errors.Is(err, stream.ErrFenced) && !errors.Is(err, stream.ErrClosed) {
				w.mu.Unlock()
				w.failItems(f.items, fmt.Errorf("%w: WAL %s: %w", stream.ErrUnavailable, w.name, err))
				continue
			}
			w.err = fmt.Errorf("WAL %s ended by a failed append: %w", w.name, err)
			if w.timer != nil {
				w.timer.Stop()
				w.timer = nil
			}
		}
		rest := w.queue
		w.queue, w.queueBytes = nil, 0
		w.notifyIdleLocked()
		w.mu.Unlock()
		if first {
			w.s.walDied(w)
		}
		w.failItems(f.items, err)
		w.failItems(rest, err)
	}
}

// idleLocked reports whether the WAL has nothing queued or in flight.
func (w *writer) idleLocked() bool { return len(w.queue) == 0 && w.inflight == 0 }

// notifyIdleLocked wakes awaitIdle's waiters if the WAL is idle.
func (w *writer) notifyIdleLocked() {
	if w.idleCh != nil && w.idleLocked() {
		close(w.idleCh)
		w.idleCh = nil
	}
}

// awaitIdle waits until the WAL is idle, for at most max after it last
// turned busy, or until ctx is done (Options.CompactYield).
func (w *writer) awaitIdle(ctx context.Context, max time.Duration) {
	w.mu.Lock()
	wait := max - time.Since(w.busySince)
	if w.idleLocked() || wait <= 0 {
		w.mu.Unlock()
		return
	}
	if w.idleCh == nil {
		w.idleCh = make(chan struct{})
	}
	idle := w.idleCh
	w.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}

// ackItems completes the virtual appends of one acknowledged WAL batch,
// handing each stream its entries at once so that a compaction snapshot
// sees all or none of a batch's entries of a stream.
func (w *writer) ackItems(items []*queued, walOff, pos int64) {
	order, by := byStream(items)
	for _, h := range order {
		h.ackedItems(by[h], walOff, pos)
	}
}

// ackedBytesNow is the payload bytes of the WAL batches acknowledged so far.
func (w *writer) ackedBytesNow() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ackedBytes
}

// byStream groups items by stream, streams in order of first appearance.
func byStream(items []*queued) ([]*vstream, map[*vstream][]*queued) {
	var order []*vstream
	by := make(map[*vstream][]*queued)
	for _, q := range items {
		if _, ok := by[q.h]; !ok {
			order = append(order, q.h)
		}
		by[q.h] = append(by[q.h], q)
	}
	return order, by
}

func (w *writer) failItems(items []*queued, err error) {
	order, by := byStream(items)
	for _, h := range order {
		h.failedBatch(by[h], err)
	}
}

// close stops the WAL: queued appends are flushed, in-flight ones
// completed, then the base session closes.
func (w *writer) close() {
	w.closedOnce.Do(func() {
		w.mu.Lock()
		for len(w.queue) > 0 && w.err == nil {
			if w.inflight >= w.s.opts.MaxInflightFlushes {
				w.mu.Unlock()
				time.Sleep(time.Millisecond)
				w.mu.Lock()
				continue
			}
			w.flushLocked()
		}
		if w.timer != nil {
			w.timer.Stop()
			w.timer = nil
		}
		// The batches in flight complete as the base answers them: one
		// that lands is acknowledged (the WAL does not end by a close
		// before its last ack, W7 is for failed appends).
		w.closing = true
		rest := w.queue
		w.queue = nil
		w.notifyIdleLocked()
		close(w.flushes)
		if w.kick != nil {
			close(w.kick)
		}
		w.mu.Unlock()
		w.failItems(rest, stream.ErrClosed)
		<-w.ackerDone
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("%w: WAL %s closed", stream.ErrClosed, w.name)
		}
		w.mu.Unlock()
		_ = w.base.Close()
	})
}
