package chunked

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"

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
			w.adoptOwn(m)
		}
		if newStart <= w.ch.Start && !checkpoint {
			return nil // a no-op, once the probe showed we are not fenced
		}
		start := max(newStart, w.ch.Start)
		if err := w.writePages(ctx); err != nil {
			return fmt.Errorf("stream %q: trim to %d: %w", w.l.name, newStart, err)
		}
		i, _ := slices.BinarySearchFunc(w.ch.Entries, start, func(e indexEntry, off int64) int {
			if e.end() <= off {
				return -1
			}
			return 1
		})
		pages, index := w.ch.indexFrom(start)
		m := &manifest{Kind: manTrim, Owner: w.self, PutID: w.s.newPutID(), Start: start,
			IdxEnd: w.ch.Tail.Seq, IdxNext: w.ch.Tail.Next, IdxSess: w.ch.Tail.Max,
			Pages: pages, Index: index}
		won, _, err := w.s.putManifest(ctx, w.l, v+1, m)
		if err != nil {
			return fmt.Errorf("stream %q: trim to %d: %w", w.l.name, newStart, err)
		}
		if !won {
			continue // someone else's manifest holds v+1: probe again
		}
		moved := start > w.ch.Start
		dropped := w.ch.Pages[:len(w.ch.Pages)-len(pages)]
		w.ch.KnownV = v + 1
		w.ch.Start = start
		w.sinceManifest = 0
		w.ch.Entries = w.ch.Entries[i:]
		w.ch.Pages = pages
		w.publish()
		w.s.writeHint(ctx, w.l, v+1)
		if moved || w.s.opts.broken.gcByOffset {
			w.s.startGC(w.l, m, w.ch.Entries, dropped)
		} else {
			w.s.collectGaps(w.l, w.ch.Entries, w.ch.IdxEnd, m.IdxEnd)
		}
		w.ch.IdxEnd = m.IdxEnd
		return nil
	}
}

// adoptOwn takes the start of m, a manifest this session wrote whose put
// reported failure (a trim whose outcome was unknown, which landed
// anyway): readers may have seen that start, and R5 forbids the next
// manifest to move it back.
func (w *writer) adoptOwn(m *manifest) {
	if m.Owner != w.self || m.Start <= w.ch.Start {
		return
	}
	w.ch.Start = m.Start
	w.publish()
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

// writePages writes index pages of the chain's entries after its last
// page while a whole page of them is there, so that the next manifest
// names them by page (Options.IndexPageEntries). A page is written once,
// before the first manifest that names it; one whose manifest never lands
// (the session failed first) stays until the stream is deleted.
func (w *writer) writePages(ctx context.Context) error {
	n := w.s.opts.IndexPageEntries
	if n <= 0 {
		return nil
	}
	end := w.ch.pagesEnd()
	i := sort.Search(len(w.ch.Entries), func(i int) bool { return w.ch.Entries[i].Seq >= end })
	for ; len(w.ch.Entries)-i >= n; i += n {
		es := w.ch.Entries[i : i+n]
		p := pageRef{ID: w.s.newPutID(), First: es[0].Seq, End: es[n-1].Seq + 1,
			Base: es[0].Base, Next: es[n-1].end(), N: uint32(n)}
		if err := w.s.putIfAbsent(ctx, w.l.page(p), encodePage(p, es, w.l.seed)); err != nil {
			return fmt.Errorf("index page: %w", err)
		}
		w.ch.Pages = append(w.ch.Pages, p)
	}
	return nil
}

// collectGaps deletes, in the background, the slots in [from, to) that
// entries (the chain a manifest with IdxEnd to names) do not name: the
// fence chunks and zombies written since the manifest before it (R2: a
// subset of what that manifest authorises). A checkpoint (a manifest whose
// start did not move) needs no more, so it lists nothing: startGC's LIST
// would read every chunk key of a stream that is never trimmed, at every
// checkpoint. The keys are known, so absent ones cost nothing but their
// place in a Delete, which is idempotent.
func (s *Store) collectGaps(l layout, entries []indexEntry, from, to uint64) {
	i, _ := slices.BinarySearchFunc(entries, from, func(e indexEntry, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	var del []string
	for seq := from; seq < to; seq++ {
		if i < len(entries) && entries[i].Seq == seq {
			i++
			continue
		}
		del = append(del, l.chunk(seq))
	}
	s.deleteLater(l, del)
}

// deleteLater deletes keys in the background, a thousand per call.
func (s *Store) deleteLater(l layout, keys []string) {
	if len(keys) == 0 {
		return
	}
	s.gcs.Add(1)
	go func() {
		defer s.gcs.Done()
		for page := range slices.Chunk(keys, 1000) {
			if err := s.call(s.ctx, "delete", l.prefix, func(ctx context.Context) error { return s.st.Delete(ctx, page) }); err != nil {
				s.gcFailed(l, "delete", err)
				return
			}
		}
	}()
}

// startGC deletes, in the background, the slots below m.IdxEnd that m does
// not index (R2: GC by manifest, never by offsets): chunks wholly below the
// start, fence chunks and zombies. Slots at or after IdxEnd are never
// touched. entries are the chunks m names; dropped are the index pages the
// manifest before m named and m does not (all below m's start), deleted by
// key.
func (s *Store) startGC(l layout, m *manifest, entries []indexEntry, dropped []pageRef) {
	keep := map[uint64]bool{}
	for _, e := range entries {
		keep[e.Seq] = true
	}
	keys := make([]string, len(dropped))
	for i, p := range dropped {
		keys[i] = l.page(p)
	}
	s.deleteLater(l, keys)
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
