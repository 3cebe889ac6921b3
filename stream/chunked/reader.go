package chunked

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/stratastream/strata/stream"
)

// reader is a read-only session. It never writes: it follows the chain with
// validity walks that end by probing the next manifest (R4), re-walking
// whenever a Fetch reaches past what it knows, so it sees every append
// acked before the Fetch began, by any process.
type reader struct {
	s      *Store
	l      layout
	mu     sync.Mutex // serialises refreshes; guards ch and closed
	ch     chain
	closed bool
}

func (s *Store) openReader(ctx context.Context, l layout) (*reader, error) {
	var gone uint64 // the version whose index page was gone, plus one
	for {
		v, m, err := s.latestManifest(ctx, l)
		if err != nil {
			return nil, err
		}
		if m.Kind == manDelete {
			return nil, deletedErr(l)
		}
		c, err := s.chainOf(ctx, l, v, m, nil)
		if errors.Is(err, errPageGone) && gone < v+1 {
			// A trim since dropped the page and wrote a newer manifest.
			gone = v + 1
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %q: %s: %w", l.name, l.manifest(v), err)
		}
		r := &reader{s: s, l: l, ch: c}
		if _, err := s.walk(ctx, l, &r.ch, nil); err != nil {
			return nil, err
		}
		return r, nil
	}
}

func (r *reader) Name() string  { return r.l.name }
func (r *reader) Epoch() uint64 { return 0 }

func (r *reader) StartOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch.Start
}

func (r *reader) NextOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch.Tail.Next
}

func (r *reader) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	return stream.FailedAppend(fmt.Errorf("%w: stream %q is open read-only", stream.ErrInvalidArgument, r.l.name))
}

func (r *reader) Trim(ctx context.Context, newStart int64) error {
	return fmt.Errorf("%w: stream %q is open read-only", stream.ErrInvalidArgument, r.l.name)
}

func (r *reader) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: stream %q (read-only)", stream.ErrClosed, r.l.name)
	}
	// Anything the caller may want beyond what is known: re-walk first.
	if end > r.ch.Tail.Next || start > r.ch.Tail.Next {
		if err := r.refresh(ctx); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		out, err := r.s.fetch(ctx, r.l, r.ch.Start, r.ch.Tail.Next, r.ch.Entries, start, end, maxBytes)
		if !errors.Is(err, errChunkGone) {
			return out, err
		}
		if attempt > 0 {
			return nil, fmt.Errorf("%w: %w", stream.ErrCorrupt, err)
		}
		// Trimmed and collected since we looked: learn the new manifest.
		if err := r.refresh(ctx); err != nil {
			return nil, err
		}
	}
}

func (r *reader) refresh(ctx context.Context) error {
	c := r.ch
	if _, err := r.s.walk(ctx, r.l, &c, nil); err != nil {
		return fmt.Errorf("stream %q (read-only): %w", r.l.name, err)
	}
	r.ch = c
	return nil
}

func (r *reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("%w: stream %q (read-only)", stream.ErrClosed, r.l.name)
	}
	r.closed = true
	return nil
}
