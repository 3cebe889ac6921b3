package chunked

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/stratastream/strata/stream"
)

// errChunkGone: an indexed chunk is absent or holds another put (trimmed
// and collected, possibly refilled by a stale writer).
var errChunkGone = errors.New("indexed chunk is gone")

// fetch serves Fetch from a chain snapshot: the valid chunks overlapping
// [start, end), read from the cache or the Storage, checksummed, and cut to
// maxBytes (at least one batch).
func (s *Store) fetch(ctx context.Context, l layout, first, next int64, entries []indexEntry, start, end int64, maxBytes int) ([]stream.Batch, error) {
	if start < first || start > next {
		return nil, fmt.Errorf("%w: stream %q: offset %d outside [%d, %d]", stream.ErrOffsetOutOfRange, l.name, start, first, next)
	}
	if maxBytes <= 0 || maxBytes > s.opts.MaxFetchBytes {
		maxBytes = s.opts.MaxFetchBytes
	}
	end = min(end, next)
	if start >= end {
		return nil, nil
	}
	i := sort.Search(len(entries), func(i int) bool { return entries[i].end() > start })
	var out []stream.Batch
	size := 0
	for ; i < len(entries) && entries[i].Base < end; i++ {
		batches, err := s.loadChunk(ctx, l, entries[i])
		if err != nil {
			return nil, err
		}
		for _, b := range batches {
			if b.EndOffset() <= start {
				continue
			}
			if b.BaseOffset >= end || len(out) > 0 && size+b.Size() > maxBytes {
				return out, nil
			}
			out = append(out, copyBatch(b))
			size += b.Size()
		}
	}
	return out, nil
}

func copyBatch(b stream.Batch) stream.Batch {
	b.Payload = append([]byte(nil), b.Payload...)
	if b.Properties != nil {
		p := make(map[string]string, len(b.Properties))
		for k, v := range b.Properties {
			p[k] = v
		}
		b.Properties = p
	}
	return b
}

// loadChunk returns the batches of indexed chunk e, checking that the
// stored object is that very put (by put id, base and count) and every
// checksum.
func (s *Store) loadChunk(ctx context.Context, l layout, e indexEntry) ([]stream.Batch, error) {
	key := l.chunk(e.Seq)
	if b, ok, err := s.cache.get(l, e.Seq, e.PutID); ok {
		if err != nil {
			return nil, fmt.Errorf("stream %q: %s [%d, %d): %w", l.name, key, e.Base, e.end(), err)
		}
		return b, nil
	}
	data, err := s.get(ctx, key, 0, -1)
	if errors.Is(err, stream.ErrNotFound) {
		return nil, fmt.Errorf("stream %q: %s [%d, %d): %w", l.name, key, e.Base, e.end(), errChunkGone)
	}
	if err != nil {
		return nil, fmt.Errorf("stream %q: fetch %s: %w", l.name, key, err)
	}
	h, err := decodeChunkHeader(data, l.seed)
	if err == nil && (h.PutID != e.PutID || h.Base != e.Base || h.Count != e.Count) {
		return nil, fmt.Errorf("stream %q: %s holds put %x [%d, %d), want %x: %w", l.name, key, h.PutID[:4], h.Base, h.end(), e.PutID[:4], errChunkGone)
	}
	_, batches, err := decodeChunk(data, l.seed)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %s [%d, %d): %w", l.name, key, e.Base, e.end(), err)
	}
	s.cache.add(l, e.Seq, e.PutID, batches, len(data), nil)
	return batches, nil
}
