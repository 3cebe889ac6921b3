package chunked

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/stratastream/strata/stream"
)

// tail is where a validity walk stands: the next slot to read, the offset
// a valid chunk there must start at, and the highest session among the
// valid chunks so far.
type tail struct {
	Seq  uint64
	Next int64
	Max  sessionKey
}

// valid is the validity rule (docs/engine.md): a chunk is valid iff its
// session is at least the highest among the valid chunks before it and its
// base offset is the running next offset. Anything else is a zombie.
func (t tail) valid(h chunkHeader) bool {
	return !h.Sess.less(t.Max) && h.Base == t.Next
}

// take extends the tail over valid chunk h at slot seq.
func (t *tail) take(seq uint64, h chunkHeader) {
	t.Seq = seq + 1
	t.Next = h.end()
	t.Max = h.Sess
}

// chain is one session's knowledge of a stream incarnation: the newest
// manifest it knows, the start offset, the valid chunks overlapping the
// start, and the tail after the last of them.
type chain struct {
	KnownV uint64
	Start  int64
	// Entries are the valid chunks overlapping Start, in slot order. The
	// first of them are those of Pages: written index pages that the next
	// manifest names instead of listing their entries.
	Entries []indexEntry
	Pages   []pageRef
	Tail    tail
	// IdxEnd is the IdxEnd of the manifest the chain was built from, or
	// of the last one its writer wrote since: the slots from there to
	// Tail.Seq are what the next walk from that manifest reads again, and
	// the slots below it were collected when that manifest was written.
	IdxEnd uint64
}

// chainOf is the chain as manifest m (version v) states it; a walk
// continues from its tail, seeded with the chain's running session (R7).
// The entries of m's index pages come from have where it holds them (a
// chain that named the same pages), else from storage; errPageGone when
// one is gone.
func (s *Store) chainOf(ctx context.Context, l layout, v uint64, m *manifest, have *chain) (chain, error) {
	entries, err := s.loadIndex(ctx, l, m, have)
	if err != nil {
		return chain{}, err
	}
	c := chain{
		KnownV:  v,
		Start:   m.Start,
		Entries: entries,
		Pages:   slices.Clone(m.Pages),
		Tail:    tail{Seq: m.IdxEnd, Next: m.IdxNext, Max: m.IdxSess},
		IdxEnd:  m.IdxEnd,
	}
	if s.opts.broken.seedWithOwner && m.Kind != manCreate {
		c.Tail.Max = m.Owner
	}
	return c, nil
}

// pagesEnd is the slot after the last entry in a page (0: no pages).
func (c *chain) pagesEnd() uint64 {
	if len(c.Pages) == 0 {
		return 0
	}
	return c.Pages[len(c.Pages)-1].End
}

// indexFrom is what a manifest with start offset start names: the pages
// that reach past start, and the entries after the last page that reach
// past it.
func (c *chain) indexFrom(start int64) ([]pageRef, []indexEntry) {
	p := slices.IndexFunc(c.Pages, func(p pageRef) bool { return p.Next > start })
	var pages []pageRef
	if p >= 0 {
		pages = slices.Clone(c.Pages[p:])
	}
	end := c.pagesEnd()
	i := sort.Search(len(c.Entries), func(i int) bool {
		return c.Entries[i].Seq >= end && c.Entries[i].end() > start
	})
	return pages, slices.Clone(c.Entries[i:])
}

func (c *chain) add(seq uint64, h chunkHeader) {
	if h.Count > 0 {
		c.Entries = append(c.Entries, indexEntry{Seq: seq, Base: h.Base, Count: h.Count, PutID: h.PutID})
	}
	c.Tail.take(seq, h)
}

// walkResult says how a walk ended.
type walkResult struct {
	// Found counts the valid chunks the walk added to the chain.
	Found int
	// Restarted: a newer manifest replaced the chain during the walk.
	Restarted bool
}

// walk extends c over the valid chunks after its tail until the first
// absent slot, then probes the next manifest (R4); when one exists, it
// restarts from it and walks again. self is the walking writer's session,
// nil for a read-only walker. A writer meeting a valid chunk or a manifest
// of a newer session gets ErrFenced; any walker meeting the delete manifest
// gets errDeleted.
func (s *Store) walk(ctx context.Context, l layout, c *chain, self *sessionKey) (walkResult, error) {
	var res walkResult
	var skipped error // a manifest whose index page was gone: the chain is older
	for {
		if skipped == nil {
			h, ok, err := s.getChunkHeader(ctx, l, c.Tail.Seq)
			if err != nil {
				return res, err
			}
			if ok {
				if c.Tail.valid(h) {
					if self != nil && self.less(h.Sess) {
						return res, fmt.Errorf("%w: stream %q: chunk %s of session %v is newer than session %v",
							stream.ErrFenced, l.name, l.chunk(c.Tail.Seq), h.Sess, *self)
					}
					c.add(c.Tail.Seq, h)
					res.Found++
				} else {
					c.Tail.Seq++
				}
				continue
			}
		}
		// R4: the walk ends only when the next manifest is absent too.
		if s.opts.broken.noWalkProbe {
			return res, nil
		}
		m, ok, err := s.getManifest(ctx, l, c.KnownV+1)
		if err != nil {
			return res, err
		}
		if !ok {
			if skipped != nil {
				return res, fmt.Errorf("stream %q: %s names %w, and no later manifest exists", l.name, l.manifest(c.KnownV), skipped)
			}
			return res, nil
		}
		v := c.KnownV + 1
		if m.Kind == manDelete {
			return res, deletedErr(l)
		}
		if self != nil {
			if self.less(m.Owner) {
				return res, fmt.Errorf("%w: stream %q: manifest %s of session %v is newer than session %v",
					stream.ErrFenced, l.name, l.manifest(v), m.Owner, *self)
			}
			if m.Owner == *self {
				// One's own manifest (a trim whose outcome was unknown)
				// covers only slots already walked; its start holds (R5).
				c.KnownV = v
				c.Start = max(c.Start, m.Start)
				continue
			}
		}
		// A newer manifest: GC may have removed (and stale puts refilled)
		// slots this walk has read; restart from it.
		nc, err := s.chainOf(ctx, l, v, m, c)
		if errors.Is(err, errPageGone) {
			// A trim after m dropped the page and collected it, so a
			// manifest after m exists (R2 for pages): go on to it, reading
			// no slots meanwhile.
			c.KnownV, skipped = v, err
			continue
		}
		if err != nil {
			return res, err
		}
		nc.Start = max(nc.Start, c.Start)
		*c, skipped = nc, nil
		res.Restarted = true
		res.Found = 0
	}
}

// errDeleted is wrapped by errors about an incarnation a Delete fenced.
var errDeleted = fmt.Errorf("%w: stream deleted", stream.ErrNotFound)

func deletedErr(l layout) error {
	return fmt.Errorf("stream %q incarnation %s: %w", l.name, l.inc, errDeleted)
}
