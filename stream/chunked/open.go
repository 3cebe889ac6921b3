package chunked

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratastream/strata/stream"
)

// openSession performs the read-write open of incarnation l with epoch
// (docs/engine.md, "Open"): find the newest manifest, write the next one
// (which orders this session after every earlier one, R5), walk the chain
// (R4), claim the first free slot with a fence chunk, and probe the manifest
// chain once more after the fence landed.
func (s *Store) openSession(ctx context.Context, l layout, epoch uint64) (sessionKey, chain, error) {
	v, m, err := s.latestManifest(ctx, l)
	if err != nil {
		return sessionKey{}, chain{}, err
	}
	var self sessionKey
	var mine *manifest
	for {
		if m.Kind == manDelete {
			return self, chain{}, deletedErr(l)
		}
		if m.Owner.Epoch > epoch {
			return self, chain{}, fmt.Errorf("%w: stream %q: open with epoch %d, stored epoch is %d (%s)",
				stream.ErrFenced, l.name, epoch, m.Owner.Epoch, l.manifest(v))
		}
		self = sessionKey{Epoch: epoch, Session: v + 1}
		mine = &manifest{Kind: manOpen, Owner: self, PutID: s.newPutID(), Start: m.Start,
			IdxEnd: m.IdxEnd, IdxNext: m.IdxNext, IdxSess: m.IdxSess, Pages: m.Pages, Index: m.Index}
		won, other, err := s.putManifest(ctx, l, v+1, mine)
		if err != nil {
			return self, chain{}, err
		}
		if won {
			break
		}
		v, m = v+1, other
		// Probe on from the winner: newer manifests may follow it.
		for {
			next, ok, err := s.getManifest(ctx, l, v+1)
			if err != nil {
				return self, chain{}, err
			}
			if !ok {
				break
			}
			v, m = v+1, next
		}
	}
	v++
	s.writeHint(ctx, l, v)
	c, err := s.chainOf(ctx, l, v, mine, nil)
	if errors.Is(err, errPageGone) {
		// Only a manifest after mine can have let a page mine names go:
		// a Delete's or a newer session's trim.
		if oerr := s.overtaken(ctx, l, v, self); oerr != nil {
			return self, chain{}, oerr
		}
	}
	if err != nil {
		return self, chain{}, err
	}
	if _, err := s.walk(ctx, l, &c, &self); err != nil {
		return self, chain{}, err
	}
	if err := s.placeFence(ctx, l, &c, self); err != nil {
		return self, chain{}, err
	}
	// R4: a newer manifest written while we walked and fenced wins.
	if s.opts.broken.noWalkProbe {
		return self, c, nil
	}
	if err := s.overtaken(ctx, l, c.KnownV, self); err != nil {
		return self, chain{}, err
	}
	return self, c, nil
}

// overtaken is the error that ends the open of session self when a
// manifest follows version v: the delete manifest's, or ErrFenced for a
// newer session's; nil when none does.
func (s *Store) overtaken(ctx context.Context, l layout, v uint64, self sessionKey) error {
	m, ok, err := s.getManifest(ctx, l, v+1)
	switch {
	case err != nil || !ok:
		return err
	case m.Kind == manDelete:
		return deletedErr(l)
	}
	return fmt.Errorf("%w: stream %q: manifest %s of session %v appeared during the open of session %v",
		stream.ErrFenced, l.name, l.manifest(v+1), m.Owner, self)
}

// putManifest puts manifest v. won reports that the stored object is this
// very put (R1: by its put id); otherwise other is the manifest that holds
// version v. A put whose outcome is unknown is retried once; if that
// fails too, the error wraps ErrUnavailable.
func (s *Store) putManifest(ctx context.Context, l layout, v uint64, m *manifest) (won bool, other *manifest, err error) {
	key := l.manifest(v)
	data := encodeManifest(m, l.seed)
	for attempt := 0; ; attempt++ {
		err := s.putIfAbsent(ctx, key, data)
		if err == nil {
			return true, nil, nil
		}
		if !errors.Is(err, stream.ErrAlreadyExists) {
			if attempt == 0 {
				continue
			}
			return false, nil, err
		}
		stored, ok, err := s.getManifest(ctx, l, v)
		if err != nil {
			return false, nil, err
		}
		if !ok {
			// Taken and gone again: only a Delete removes manifests, and
			// it keeps them; treat it as a backend fault.
			return false, nil, fmt.Errorf("%w: stream %q: %s reported taken but absent", stream.ErrUnavailable, l.name, key)
		}
		if stored.PutID == m.PutID {
			return true, nil, nil
		}
		return false, stored, nil
	}
}

// placeFence claims the first free slot after c's tail with an empty fence
// chunk of session self. On a collision it reads the winner: one's own put
// (R1) is the fence; a valid chunk of an older session is taken into the
// chain; a valid chunk of a newer session fences this open; a zombie is
// skipped.
func (s *Store) placeFence(ctx context.Context, l layout, c *chain, self sessionKey) error {
	for {
		seq := c.Tail.Seq
		key := l.chunk(seq)
		id := s.newPutID()
		data := encodeChunk(l.seed, chunkFence, self, c.Tail.Next, id, nil)
		var err error
		for attempt := 0; attempt < 2; attempt++ {
			if err = s.putIfAbsent(ctx, key, data); err == nil || errors.Is(err, stream.ErrAlreadyExists) {
				break
			}
		}
		if err == nil {
			c.Tail.Seq, c.Tail.Max = seq+1, self
			return nil
		}
		if !errors.Is(err, stream.ErrAlreadyExists) {
			return err
		}
		h, ok, err := s.getChunkHeader(ctx, l, seq)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			continue // taken and deleted again; try the slot once more
		case h.PutID == id:
			c.Tail.Seq, c.Tail.Max = seq+1, self
			return nil
		case c.Tail.valid(h):
			if self.less(h.Sess) {
				return fmt.Errorf("%w: stream %q: fence slot %s taken by newer session %v", stream.ErrFenced, l.name, key, h.Sess)
			}
			c.add(seq, h)
		default:
			c.Tail.Seq = seq + 1
		}
	}
}
