package chunked

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/stratastream/strata/stream"
)

// call runs one Storage call bounded by Options.OpTimeout. It returns when
// the call does or when the timeout passes, whichever is first, so a
// backend that hangs (a stopped server, a stuck mount) surfaces as
// ErrUnavailable promptly; a put abandoned this way has an unknown outcome
// and the protocol treats it so (R1, R6).
func (s *Store) call(ctx context.Context, op, key string, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- f(ctx) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, stream.ErrAlreadyExists), errors.Is(err, stream.ErrNotFound):
		return err
	case errors.Is(err, stream.ErrUnavailable):
		return fmt.Errorf("chunked %s %s (%s): %w", op, key, s.opts.Driver, err)
	}
	return fmt.Errorf("%w: chunked %s %s (%s): %w", stream.ErrUnavailable, op, key, s.opts.Driver, err)
}

func (s *Store) putIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.call(ctx, "put-if-absent", key, func(ctx context.Context) error { return s.st.PutIfAbsent(ctx, key, data) })
}

func (s *Store) get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	retry := ctx.Value(readRetriesKey{}) != nil
	for attempt := 1; ; attempt++ {
		var out []byte
		err := s.call(ctx, "get", key, func(ctx context.Context) error {
			b, err := s.st.Get(ctx, key, off, n)
			out = b
			return err
		})
		if err == nil {
			return out, nil
		}
		// A read changes nothing, so retrying one is always safe; not one
		// that ran into OpTimeout (a hung backend: the open fails rather
		// than wait several OpTimeouts).
		if !retry || attempt == readAttempts || !errors.Is(err, stream.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		t := time.NewTimer(readBackoff << (attempt - 1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-s.ctx.Done(): // the Store is closing
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// readRetriesKey marks a context whose reads are retried on transient
// errors (withReadRetries).
type readRetriesKey struct{}

// withReadRetries returns ctx with transient read errors retried, up to
// readAttempts per read: an open reads many objects (generations,
// manifests, index pages, chunk headers), and one transient failure among
// them would otherwise fail it. Within the caller's ctx.
func withReadRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, readRetriesKey{}, true)
}

const (
	readAttempts = 4
	readBackoff  = 10 * time.Millisecond
)

// getManifest reads manifest v; ok is false when it does not exist.
func (s *Store) getManifest(ctx context.Context, l layout, v uint64) (m *manifest, ok bool, err error) {
	key := l.manifest(v)
	b, err := s.get(ctx, key, 0, -1)
	if errors.Is(err, stream.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	m, err = decodeManifest(b, l.seed)
	if err != nil {
		return nil, false, fmt.Errorf("stream %q: %s: %w", l.name, key, err)
	}
	return m, true, nil
}

// errPageGone: an index page a manifest names is absent. Only a trim's GC
// removes pages, after a later manifest dropped them, so a walker goes on
// to that manifest; where there is none, the stream is corrupt.
var errPageGone = fmt.Errorf("%w: index page missing", stream.ErrCorrupt)

// loadIndex returns the entries manifest m names: those of its pages that
// reach past its start, then its own. The entries of pages that chain have
// also names are taken from it; the rest are read, a few at a time.
func (s *Store) loadIndex(ctx context.Context, l layout, m *manifest, have *chain) ([]indexEntry, error) {
	if len(m.Pages) == 0 {
		return slices.Clone(m.Index), nil
	}
	parts := make([][]indexEntry, len(m.Pages))
	errs := make([]error, len(m.Pages))
	known := map[putID]bool{}
	if have != nil {
		for _, p := range have.Pages {
			known[p.ID] = true
		}
	}
	sem := make(chan struct{}, pageReads)
	var wg sync.WaitGroup
	for i, p := range m.Pages {
		if known[p.ID] {
			if parts[i] = have.pageEntries(p); parts[i] != nil {
				continue
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			parts[i], errs[i] = s.getPage(ctx, l, p)
			<-sem
		}()
	}
	wg.Wait()
	n := len(m.Index)
	for i, es := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		n += len(es)
	}
	out := make([]indexEntry, 0, n)
	for _, es := range parts {
		out = append(out, es...)
	}
	// The first page may begin below the start.
	i := sort.Search(len(out), func(i int) bool { return out[i].end() > m.Start })
	return append(out[i:], m.Index...), nil
}

// pageReads bounds the index pages one loadIndex reads at once.
const pageReads = 8

// pageEntries returns the entries of page p, which c names, when c still
// holds all of them, else nil.
func (c *chain) pageEntries(p pageRef) []indexEntry {
	i := sort.Search(len(c.Entries), func(i int) bool { return c.Entries[i].Seq >= p.First })
	j := i + int(p.N)
	if j > len(c.Entries) || c.Entries[i].Seq != p.First || c.Entries[j-1].Seq != p.End-1 {
		return nil
	}
	return c.Entries[i:j:j]
}

// getPage reads index page p.
func (s *Store) getPage(ctx context.Context, l layout, p pageRef) ([]indexEntry, error) {
	key := l.page(p)
	b, err := s.get(ctx, key, 0, -1)
	if errors.Is(err, stream.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", errPageGone, key)
	}
	if err != nil {
		return nil, err
	}
	es, err := decodePage(b, p, l.seed)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %s: %w", l.name, key, err)
	}
	return es, nil
}

// getChunkHeader reads the header of slot seq; ok is false when the slot is
// empty.
func (s *Store) getChunkHeader(ctx context.Context, l layout, seq uint64) (h chunkHeader, ok bool, err error) {
	key := l.chunk(seq)
	// One GET either way: a small chunk comes whole, and goes to the
	// cache, so that a replay after the walk (a new owner reading the
	// tail) reads it again from memory, not from the backend.
	b, err := s.get(ctx, key, 0, walkReadAhead)
	if errors.Is(err, stream.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	h, err = decodeChunkHeader(b, l.seed)
	if err != nil {
		return h, false, fmt.Errorf("stream %q: %s: %w", l.name, key, err)
	}
	if len(b) < walkReadAhead {
		if _, batches, derr := decodeChunk(b, l.seed); derr == nil {
			s.cache.add(l, seq, h.PutID, batches, len(b), nil)
		}
	}
	return h, true, nil
}

// walkReadAhead is how much of a chunk a walk reads: all of a small one.
const walkReadAhead = 64 << 10

// readHint returns the manifest version the hint names, or 0 when it is
// absent or unreadable (the hint is only a starting point: R4 probing
// finds the newest manifest from any version that exists).
func (s *Store) readHint(ctx context.Context, l layout) (uint64, error) {
	b, err := s.get(ctx, l.hint(), 0, -1)
	if errors.Is(err, stream.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := decodeHint(b, l.seed)
	if err != nil {
		s.opts.Logger.Warn("chunked: ignoring unreadable hint", "stream", l.name, "key", l.hint(), "err", err)
		return 0, nil
	}
	return v, nil
}

// writeHint records v as the newest manifest version (best effort: a lost
// or stale hint costs a few probes, never correctness).
func (s *Store) writeHint(ctx context.Context, l layout, v uint64) {
	key := l.hint()
	err := s.call(ctx, "put", key, func(ctx context.Context) error { return s.st.Put(ctx, key, encodeHint(v, l.seed)) })
	if err != nil {
		s.opts.Logger.Debug("chunked: hint not written", "stream", l.name, "version", v, "err", err)
	}
}

// latestManifest finds the newest manifest by probing forward from the hint
// (never LIST). errDeleted when the incarnation's objects are gone.
func (s *Store) latestManifest(ctx context.Context, l layout) (uint64, *manifest, error) {
	v, err := s.readHint(ctx, l)
	if err != nil {
		return 0, nil, err
	}
	m, ok, err := s.getManifest(ctx, l, v)
	if err != nil {
		return 0, nil, err
	}
	if !ok && v != 0 {
		// Manifests are never deleted while the incarnation lives; a hint
		// ahead of them is impossible, so start again from the first.
		v = 0
		m, ok, err = s.getManifest(ctx, l, 0)
		if err != nil {
			return 0, nil, err
		}
	}
	if !ok {
		return 0, nil, fmt.Errorf("%w: stream %q: incarnation %s has no manifest", stream.ErrNotFound, l.name, l.inc)
	}
	for {
		next, ok, err := s.getManifest(ctx, l, v+1)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			return v, m, nil
		}
		v, m = v+1, next
	}
}
