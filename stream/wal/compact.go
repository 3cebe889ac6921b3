package wal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/stratastream/strata/stream"
)

// passPlan is what a background compaction pass copies. Every stream
// costs the same two puts per pass (its V.data append and its record)
// whatever its tail holds, so a pass copies the streams worth copying:
// those holding a fair share of the bytes that made the pass due, and those
// whose oldest batch nears CompactInterval (they pin the WAL, and would
// soon make a pass due of their own). A stream with a small, young tail
// waits: it pins only the WAL's retention, not memory.
type passPlan struct {
	all     bool  // copy every tail (a forced pass: Compact, tests)
	minTail int64 // a tail of at least this many bytes is copied
	aged    time.Time
	maxPin  int64 // a tail pinning more WAL bytes than this is copied
	backlog int64 // the bytes the tails held when the pass was planned
}

// parallelism is the V.data appends a pass of plan has in flight at once:
// CompactParallelism, doubled for each CompactBytes the tails hold from
// twice CompactBytes on (compaction falling behind), up to
// BehindCompactParallelism. The tails in memory stay bounded whatever the
// setting, and a pass only a little behind does not flood the backend:
// on one disk, puts in flight queue the WAL's fdatasyncs behind them.
func (p passPlan) parallelism(o Options) int {
	k := o.CompactParallelism
	if behind := p.backlog / max(o.CompactBytes, 1); behind >= 2 {
		k = min(k<<min(behind-1, 16), max(k, BehindCompactParallelism))
	}
	return k
}

// yield is how long a pass of plan lets each copy wait for the WAL to be
// idle (Options.CompactYield): none when compaction is falling behind
// (twice CompactBytes not yet copied), when copies must go at once.
func (p passPlan) yield(o Options) time.Duration {
	if p.backlog >= 2*o.CompactBytes {
		return 0
	}
	return o.CompactYield
}

// take says whether the plan copies a stream's tail of n bytes whose
// oldest batch was acknowledged at oldest, pinning pinned bytes of WAL.
func (p passPlan) take(n int, oldest time.Time, pinned int64) bool {
	return p.all || n == 0 || int64(n) >= p.minTail || !oldest.After(p.aged) || pinned > p.maxPin
}

// due says whether a background pass should run, and what it copies: the
// acknowledged tails reached CompactBytes (then a tail of at least a
// quarter of the average is copied), or the oldest is older than
// CompactInterval (then only the tails older than half of it).
func (s *Store) due() (passPlan, bool) {
	s.mu.Lock()
	hs := make([]*vstream, 0, len(s.handles))
	for _, h := range s.handles {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	now := time.Now()
	var (
		bytes, tails int64
		aged         bool
	)
	for _, h := range hs {
		h.mu.Lock()
		if c := h.cl; c != nil && len(c.tail) > 0 {
			bytes += int64(c.tailBytes)
			tails++
			if now.Sub(c.oldest) > s.opts.CompactInterval {
				aged = true
			}
		}
		h.mu.Unlock()
	}
	plan := passPlan{minTail: math.MaxInt64, aged: now.Add(-s.opts.CompactInterval / 2), maxPin: s.opts.CompactBytes / 2}
	if bytes >= s.opts.CompactBytes {
		plan.minTail = max(1, bytes/tails/4)
	}
	plan.backlog = bytes
	return plan, aged || bytes >= s.opts.CompactBytes
}

// pass compacts the held streams' acknowledged tails that plan takes into
// their data streams, then trims the live WAL below what the records name
// and deletes ended WALs nothing names (W6). A stream the plan leaves keeps
// its claim's pin, which bounds the trim.
func (s *Store) pass(ctx context.Context, plan passPlan) error {
	s.mu.Lock()
	w := s.w
	hs := make([]*vstream, 0, len(s.handles))
	for _, h := range s.handles {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	// W6b: the bound never exceeds the acked end read as the pass began.
	var ackedAtStart int64
	if w != nil {
		ackedAtStart = w.ackedEnd()
	}
	// A pass has up to plan.parallelism V.data appends in flight, of as
	// many streams at most.
	k := plan.parallelism(s.opts)
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, k)
		slots = newAppendSlots(k, plan.yield(s.opts))
		errMu sync.Mutex
		first error
	)
	for _, h := range hs {
		h.mu.Lock()
		take := true
		if c := h.cl; c != nil {
			var pinned int64
			if len(c.tail) > 0 {
				pinned = c.w.ackedBytesNow() - c.tail[0].walPos
			}
			take = plan.take(c.tailBytes, c.oldest, pinned)
			if !take {
				c.detachTail()
			}
		}
		h.mu.Unlock()
		if !take {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			h.opMu.Lock()
			err := h.compact(ctx, kindCompact, slots)
			h.opMu.Unlock()
			if err != nil && !errors.Is(err, stream.ErrFenced) && !errors.Is(err, stream.ErrClosed) {
				errMu.Lock()
				first = errors.Join(first, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if w != nil {
		if s.opts.broken.noGCSnap {
			ackedAtStart = w.ackedEnd()
		}
		if err := s.gcWAL(ctx, w, ackedAtStart); err != nil {
			first = errors.Join(first, err)
		}
	}
	if err := s.gcDead(ctx); err != nil {
		first = errors.Join(first, err)
	}
	return first
}

// detachTail gives the tail's entries payloads of their own: a tail a
// pass leaves is small, and its entries would otherwise keep whole WAL
// batches in memory (every other entry of which is compacted). Entries
// are replaced, never changed: a copy being read keeps its payload. Called
// with the stream's mu held.
func (c *claim) detachTail() {
	for i := range c.tail {
		t := &c.tail[i]
		if t.own {
			continue
		}
		t.e, t.own = t.e.detached(), true
	}
}

// compact copies the stream's acknowledged tail to V.data (W3b's copy,
// in the owner's own time) and writes a record: a close record (kind
// close), a park record when nothing of the stream is in flight, or a
// record moving the claim's WAL offset past what was copied. Called with
// opMu held.
func (h *vstream) compact(ctx context.Context, kind byte, slots *appendSlots) error {
	h.mu.Lock()
	c := h.cl
	if h.state != live {
		h.mu.Unlock()
		return nil
	}
	if c == nil {
		h.mu.Unlock()
		return nil // no claim: the last record names no WAL already
	}
	tail := append([]tailEntry(nil), c.tail...)
	none := h.data == nil && len(tail) == 0 // a new incarnation's V.data waits for its first copy
	h.mu.Unlock()
	if !none {
		if err := h.refreshData(ctx); err != nil {
			return err
		}
	}
	if err := h.copyTail(ctx, tail, slots); err != nil {
		return err
	}
	h.mu.Lock()
	// Drop what V.data now holds from the tail.
	k := 0
	for k < len(c.tail) && c.tail[k].e.end() <= h.dataNext {
		c.tailBytes -= len(c.tail[k].e.payload)
		k++
	}
	c.tail = append([]tailEntry(nil), c.tail[k:]...)
	if len(c.tail) > 0 {
		c.oldest = time.Now() // acknowledged during the copy
	}
	// A WAL append that failed during the copy broke the session: its
	// entries may be in the WAL (readers may have seen them), so the
	// record keeps naming it until settling has fenced and copied it (W7).
	// Park only a stream idle since the last pass: an active one would
	// claim again at its next append, a record more than moving its
	// claim on.
	park := kind == kindClose || (len(c.tail) == 0 && h.inflight == 0 && h.state == live && len(h.retry) == 0 && !h.appendedSincePass)
	h.appendedSincePass = false
	if park {
		h.cl = nil // appends from now on claim again, after this record
	}
	h.mu.Unlock()
	var rec record
	switch {
	case park:
		k := kindPark
		if kind == kindClose {
			k = kindClose
		}
		rec = h.recordLocked(byte(k))
	case len(tail) == 0:
		return nil // nothing copied, appends in flight: nothing to record
	default:
		rec = h.recordLocked(kindCompact)
		rec.claim, rec.wal = c.id, c.w.name
		rec.from = tail[len(tail)-1].walOff + 1
	}
	return h.writeRecord(ctx, rec)
}

// gcWAL trims the live WAL below the smallest WAL offset that a record of
// any of its claims may name (W6a), never above the acked end read when
// the pass began (W6b).
func (s *Store) gcWAL(ctx context.Context, w *writer, ackedAtStart int64) error {
	s.verifyClaims(ctx, w)
	w.mu.Lock()
	bound := ackedAtStart
	for _, c := range w.claims {
		if s.opts.broken.gcHeldOnly {
			c.h.mu.Lock()
			held := c.h.state == live && c.h.cl == c
			c.h.mu.Unlock()
			if !held {
				continue
			}
		}
		bound = min(bound, c.pinFrom)
	}
	trimmed := w.trimmed
	w.mu.Unlock()
	if bound <= trimmed {
		return nil
	}
	if err := w.base.Trim(ctx, bound); err != nil {
		return fmt.Errorf("wal: trimming WAL %s to %d: %w", w.name, bound, err)
	}
	w.mu.Lock()
	w.trimmed = max(w.trimmed, bound)
	w.mu.Unlock()
	return nil
}

// unclaimed says no claim names w any more, after releasing those of
// sessions that no longer hold their stream.
func (s *Store) unclaimed(ctx context.Context, w *writer) bool {
	s.verifyClaims(ctx, w)
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.claims) == 0
}

// verifyClaims releases the claims of sessions that no longer hold their
// stream (fenced by a newer owner, or closed after a failure) once
// V.meta's last record is seen not to name them.
func (s *Store) verifyClaims(ctx context.Context, w *writer) {
	w.mu.Lock()
	var cs []*claim
	for _, c := range w.claims {
		cs = append(cs, c)
	}
	w.mu.Unlock()
	for _, c := range cs {
		c.h.mu.Lock()
		stale := c.h.state == fenced || c.h.state == closed
		c.h.mu.Unlock()
		if !stale {
			continue
		}
		rec, ok, err := s.peekRecord(ctx, c.h.name)
		if err == nil && (!ok || rec.claim != c.id) {
			s.release(c)
		}
	}
}

// peekRecord reads a stream's last record through a read-only session.
func (s *Store) peekRecord(ctx context.Context, name string) (record, bool, error) {
	st, err := s.base.Open(ctx, metaName(name), stream.OpenOptions{Mode: stream.ModeReadOnly})
	if errors.Is(err, stream.ErrNotFound) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, err
	}
	defer st.Close()
	if _, err := st.Fetch(ctx, st.NextOffset(), stream.NoEnd, 1); err != nil && !errors.Is(err, stream.ErrOffsetOutOfRange) {
		return record{}, false, err
	}
	return lastRecord(ctx, st)
}

// gcDead deletes this session's ended WALs once no claim on them is left.
func (s *Store) gcDead(ctx context.Context) error {
	s.mu.Lock()
	dead := append([]*writer(nil), s.dead...)
	s.mu.Unlock()
	var errs error
	for _, d := range dead {
		if !s.unclaimed(ctx, d) {
			continue
		}
		d.close()
		if err := s.wals.Delete(ctx, d.name); err != nil && !errors.Is(err, stream.ErrNotFound) {
			errs = errors.Join(errs, fmt.Errorf("wal: deleting ended WAL %s: %w", d.name, err))
			continue
		}
		s.mu.Lock()
		for i, x := range s.dead {
			if x == d {
				s.dead = append(s.dead[:i], s.dead[i+1:]...)
				break
			}
		}
		delete(s.frozen, d.name)
		s.mu.Unlock()
	}
	return errs
}

// sweep deletes WALs of other sessions that no V.meta last record names.
// It fences such a WAL first, then looks again, so that it never deletes
// a WAL that a claim landing meanwhile names (W6). It looks in every
// store a WAL may be in (walStores).
func (s *Store) sweep(ctx context.Context) error {
	var cands []walRef
	for _, ws := range s.walStores() {
		names, err := ws.List(ctx, s.opts.Prefix+"/")
		if err != nil {
			return err
		}
		for _, n := range names {
			if sid, ok := s.parseWALName(n); ok && sid != s.sid {
				cands = append(cands, walRef{n, ws})
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	named, err := s.namedWALs(ctx)
	if err != nil {
		return err
	}
	var fencedWALs []walRef
	for _, c := range cands {
		if named[c.name] {
			continue
		}
		st, err := c.store.Open(ctx, c.name, stream.OpenOptions{Epoch: fenceEpoch})
		if err != nil {
			continue
		}
		_ = st.Close()
		fencedWALs = append(fencedWALs, c)
	}
	if len(fencedWALs) == 0 {
		return nil
	}
	if named, err = s.namedWALs(ctx); err != nil {
		return err
	}
	for _, c := range fencedWALs {
		if named[c.name] {
			continue
		}
		if err := c.store.Delete(ctx, c.name); err != nil && !errors.Is(err, stream.ErrNotFound) {
			return fmt.Errorf("wal: deleting dead WAL %s: %w", c.name, err)
		}
		s.log.Info("wal: deleted a dead session's WAL", "wal", c.name)
	}
	return nil
}

// walRef is a WAL and the store it is in.
type walRef struct {
	name  string
	store *stream.Store
}

// namedWALs reads the last record of every meta stream and returns the
// WALs they name. It reads the streams this session holds too: a holder
// that has not yet heard it was superseded (at an equal or higher epoch)
// would otherwise hide the record naming the new owner's WAL, and the
// sweep would delete acknowledged data (simulation seed 2375).
func (s *Store) namedWALs(ctx context.Context) (map[string]bool, error) {
	names, err := s.base.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool)
	for _, n := range names {
		if !strings.HasSuffix(n, metaSuffix) {
			continue
		}
		st, err := s.base.Open(ctx, n, stream.OpenOptions{Mode: stream.ModeReadOnly})
		if errors.Is(err, stream.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, ok, err := lastRecord(ctx, st)
		_ = st.Close()
		if err != nil && !errors.Is(err, stream.ErrCorrupt) {
			return nil, err
		}
		if ok && rec.wal != "" {
			out[rec.wal] = true
		}
	}
	return out, nil
}
