package chunked

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/stratastream/strata/stream"
)

// trim moves the start offset to newStart durably by writing the next
// manifest (docs/engine.md, "Trim"). R5: it first probes the manifest chain
// and is fenced by a newer session's manifest; on a collision it reads the
// winner and probes again. When the manifest is written, GC of the slots it
// authorises runs in the background (R2).
func (w *writer) trim(ctx context.Context, newStart int64) error {
	return w.writeManifest(ctx, newStart, false)
}

// checkpoint writes a manifest that moves only the index (same start), so
// that opens and readers walk from a recent slot instead of from the last
// trim (Options.CheckpointChunks).
func (w *writer) checkpoint(ctx context.Context) {
	if err := w.writeManifest(ctx, w.ch.Start, true); err != nil {
		w.sinceManifest = 0 // try again after as many chunks, not at once
		w.s.opts.Logger.Debug("chunked: checkpoint manifest not written", "stream", w.l.name, "err", err)
	}
}

// writeManifest is Trim; with checkpoint it writes even when the start
// does not move.
func (w *writer) writeManifest(ctx context.Context, newStart int64, checkpoint bool) error {
	if w.failed != nil {
		return w.failed
	}
	if newStart > w.ch.Tail.Next {
		return fmt.Errorf("%w: stream %q: trim to %d, next offset is %d", stream.ErrOffsetOutOfRange, w.l.name, newStart, w.ch.Tail.Next)
	}
	v := w.ch.KnownV
	for {
		for {
			m, ok, err := w.s.getManifest(ctx, w.l, v+1)
			if err != nil {
				return fmt.Errorf("stream %q: trim to %d: %w", w.l.name, newStart, err)
			}
			if !ok {
				break
			}
			if m.Kind == manDelete {
				w.fence(deletedFence(w.l))
				return w.failed
			}
			if w.self.less(m.Owner) {
				w.fence(fmt.Errorf("%w: stream %q: trim found manifest %s of newer session %v", stream.ErrFenced, w.l.name, w.l.manifest(v+1), m.Owner))
				return w.failed
			}
			v++
		}
		if newStart <= w.ch.Start && !checkpoint {
			return nil // a no-op, once the probe showed we are not fenced
		}
		start := max(newStart, w.ch.Start)
		i, _ := slices.BinarySearchFunc(w.ch.Entries, start, func(e indexEntry, off int64) int {
			if e.end() <= off {
				return -1
			}
			return 1
		})
		m := &manifest{Kind: manTrim, Owner: w.self, PutID: w.s.newPutID(), Start: start,
			IdxEnd: w.ch.Tail.Seq, IdxNext: w.ch.Tail.Next, IdxSess: w.ch.Tail.Max,
			Index: slices.Clone(w.ch.Entries[i:])}
		won, _, err := w.s.putManifest(ctx, w.l, v+1, m)
		if err != nil {
			return fmt.Errorf("stream %q: trim to %d: %w", w.l.name, newStart, err)
		}
		if !won {
			continue // someone else's manifest holds v+1: probe again
		}
		moved := start > w.ch.Start
		w.ch.KnownV = v + 1
		w.ch.Start = start
		w.sinceManifest = 0
		w.ch.Entries = w.ch.Entries[i:]
		w.publish()
		w.s.writeHint(ctx, w.l, v+1)
		if moved || w.s.opts.broken.gcByOffset {
			w.s.startGC(w.l, m)
		} else {
			w.s.collectGaps(w.l, m, w.ch.IdxEnd)
		}
		w.ch.IdxEnd = m.IdxEnd
		return nil
	}
}

// gcFailed logs a GC that stopped on err. A GC stopped by Close is not
// worth a warning: the slots it left are below the start, and the next
// trim's GC lists them again.
func (s *Store) gcFailed(l layout, op string, err error) {
	level := slog.LevelWarn
	if s.ctx.Err() != nil {
		level = slog.LevelDebug
	}
	s.opts.Logger.Log(context.Background(), level, "chunked: GC "+op+" failed", "stream", l.name, "err", err)
}

// collectGaps deletes, in the background, the slots in [from, m.IdxEnd)
// that m does not index: the fence chunks and zombies written since the
// manifest before m (R2: a subset of what m authorises). A checkpoint (a
// manifest whose start did not move) needs no more, so it lists nothing:
// startGC's LIST would read every chunk key of a stream that is never
// trimmed, at every checkpoint. The keys are known, so absent ones cost
// nothing but their place in a Delete, which is idempotent.
func (s *Store) collectGaps(l layout, m *manifest, from uint64) {
	i, _ := slices.BinarySearchFunc(m.Index, from, func(e indexEntry, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	var del []string
	for seq := from; seq < m.IdxEnd; seq++ {
		if i < len(m.Index) && m.Index[i].Seq == seq {
			i++
			continue
		}
		del = append(del, l.chunk(seq))
	}
	if len(del) == 0 {
		return
	}
	s.gcs.Add(1)
	go func() {
		defer s.gcs.Done()
		for page := range slices.Chunk(del, 1000) {
			if err := s.call(s.ctx, "delete", l.chunkPrefix(), func(ctx context.Context) error { return s.st.Delete(ctx, page) }); err != nil {
				s.gcFailed(l, "delete", err)
				return
			}
		}
	}()
}

// startGC deletes, in the background, the slots below m.IdxEnd that m does
// not index (R2: GC by manifest, never by offsets): chunks wholly below the
// start, fence chunks and zombies. Slots at or after IdxEnd are never
// touched.
func (s *Store) startGC(l layout, m *manifest) {
	keep := map[uint64]bool{}
	for _, e := range m.Index {
		keep[e.Seq] = true
	}
	s.gcs.Add(1)
	go func() {
		defer s.gcs.Done()
		ctx := s.ctx
		after := ""
		for {
			var keys []string
			err := s.call(ctx, "list", l.chunkPrefix(), func(ctx context.Context) error {
				k, err := s.st.List(ctx, l.chunkPrefix(), after, 1000)
				keys = k
				return err
			})
			if err != nil {
				s.gcFailed(l, "list", err)
				return
			}
			var del []string
			done := len(keys) == 0
			for _, k := range keys {
				seq, ok := l.chunkSeq(k)
				if !ok {
					continue
				}
				if s.opts.broken.gcByOffset {
					if h, ok, err := s.getChunkHeader(ctx, l, seq); err == nil && ok && h.end() <= m.Start {
						del = append(del, k)
					}
					continue
				}
				if seq >= m.IdxEnd {
					done = true
					break
				}
				if !keep[seq] {
					del = append(del, k)
				}
			}
			if len(del) > 0 {
				if err := s.call(ctx, "delete", l.chunkPrefix(), func(ctx context.Context) error { return s.st.Delete(ctx, del) }); err != nil {
					s.gcFailed(l, "delete", err)
					return
				}
			}
			if done {
				return
			}
			after = keys[len(keys)-1]
		}
	}()
}
