package chunked

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/stream"
)

// Store is the engine: a stream.DriverStore on a Storage. NewStore returns
// it behind the front door (stream.NewStore).
type Store struct {
	st    Storage
	opts  Options
	cache *chunkCache

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	gcs    sync.WaitGroup

	idPrefix [8]byte
	idSeq    atomic.Uint64

	mu       sync.Mutex
	closed   bool
	sessions map[*writer]bool
	sweeps   map[*time.Timer]layout // pending sweeps of deleted incarnations
}

var _ stream.DriverStore = (*Store)(nil)

// NewStore returns a stream.Store that keeps its streams on st: the engine
// behind the front door. The Store owns st: Store.Close closes it.
func NewStore(st Storage, opts Options) (*stream.Store, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: chunked.NewStore: nil Storage", stream.ErrInvalidArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{st: st, opts: o, cache: newChunkCache(o.CacheBytes), sessions: map[*writer]bool{}, sweeps: map[*time.Timer]layout{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	sum := sha256.Sum256([]byte(o.NewID()))
	copy(s.idPrefix[:], sum[:])
	return stream.NewStore(s), nil
}

func randomID() string { return rand.Text() }

// newPutID returns an id unique to one put (R1).
func (s *Store) newPutID() putID {
	var id putID
	copy(id[:8], s.idPrefix[:])
	binary.BigEndian.PutUint64(id[8:], s.idSeq.Add(1))
	return id
}

// Info implements stream.DriverStore.
func (s *Store) Info() stream.Info {
	return stream.Info{
		Driver:          s.opts.Driver,
		Version:         s.opts.Version,
		MaxBatchBytes:   s.opts.MaxBatchBytes,
		MaxProperties:   s.opts.MaxProperties,
		MaxFetchBytes:   s.opts.MaxFetchBytes,
		ReadOnlyOpen:    true,
		Durable:         s.opts.Durable,
		SharedNamespace: s.opts.SharedNamespace,
	}
}

// check fails once the store is closed. The front door (stream.Store) has
// checked the name and ctx.
func (s *Store) check() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: chunked store (%s)", stream.ErrClosed, s.opts.Driver)
	}
	return nil
}

// ---- generation chain ----

// currentGen finds the newest generation of name by probing g/0, g/1, ...
// (never LIST). found is false when the stream was never created.
func (s *Store) currentGen(ctx context.Context, name string) (n uint64, g generation, found bool, err error) {
	for i := uint64(0); ; i++ {
		key := genKey(name, i)
		b, err := s.get(ctx, key, 0, -1)
		if errors.Is(err, stream.ErrNotFound) {
			return n, g, found, nil
		}
		if err != nil {
			return 0, g, false, err
		}
		gi, err := decodeGeneration(b, genSeed(name))
		if err != nil {
			return 0, g, false, fmt.Errorf("stream %q: %s: %w", name, key, err)
		}
		n, g, found = i, gi, true
	}
}

// live returns the layout of name's current incarnation, or ErrNotFound.
func (s *Store) live(ctx context.Context, name string) (layout, uint64, error) {
	n, g, found, err := s.currentGen(ctx, name)
	if err != nil {
		return layout{}, 0, err
	}
	if !found || g.Kind != genLive {
		return layout{}, 0, fmt.Errorf("%w: stream %q (%s)", stream.ErrNotFound, name, s.opts.Driver)
	}
	return newLayout(name, g.Inc), n, nil
}

// Create implements stream.DriverStore: it writes the new incarnation's first
// manifest, then links it into the generation chain with put-if-absent.
func (s *Store) Create(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	for {
		n, g, found, err := s.currentGen(ctx, name)
		if err != nil {
			return err
		}
		if found && g.Kind == genLive {
			l := newLayout(name, g.Inc)
			done, err := s.finishDelete(ctx, l, n)
			if err != nil {
				return fmt.Errorf("stream %q: create: %w", name, err)
			}
			if done {
				continue // the tombstone is linked now
			}
			return fmt.Errorf("%w: stream %q (%s)", stream.ErrAlreadyExists, name, s.opts.Driver)
		}
		next := uint64(0)
		if found {
			next = n + 1
		}
		inc := s.opts.NewID()
		if !validIncID(inc) {
			return fmt.Errorf("%w: chunked: Options.NewID returned %q, not an id of [A-Za-z0-9_-]", stream.ErrInvalidArgument, inc)
		}
		l := newLayout(name, inc)
		m0 := &manifest{Kind: manCreate, PutID: s.newPutID()}
		if err := s.putIfAbsent(ctx, l.manifest(0), encodeManifest(m0, l.seed)); err != nil && !errors.Is(err, stream.ErrAlreadyExists) {
			return fmt.Errorf("stream %q: create: %w", name, err)
		}
		key := genKey(name, next)
		data := encodeGeneration(generation{Kind: genLive, Inc: inc}, genSeed(name))
		err = s.putIfAbsent(ctx, key, data)
		if err != nil && !errors.Is(err, stream.ErrAlreadyExists) {
			// Outcome unknown: read it back once.
			err = s.putIfAbsent(ctx, key, data)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, stream.ErrAlreadyExists) {
			return fmt.Errorf("stream %q: create: %w", name, err)
		}
		b, err := s.get(ctx, key, 0, -1)
		if err != nil {
			return fmt.Errorf("stream %q: create: %w", name, err)
		}
		other, err := decodeGeneration(b, genSeed(name))
		if err != nil {
			return fmt.Errorf("stream %q: %s: %w", name, key, err)
		}
		if other.Kind == genLive && other.Inc == inc {
			return nil
		}
		s.removeObjects(ctx, l, false) // our unlinked incarnation
		if other.Kind == genLive {
			return fmt.Errorf("%w: stream %q (%s)", stream.ErrAlreadyExists, name, s.opts.Driver)
		}
	}
}

// Open implements stream.DriverStore.
func (s *Store) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ctx = withReadRetries(ctx)
	for attempt := 0; ; attempt++ {
		l, n, err := s.live(ctx, name)
		if errors.Is(err, stream.ErrNotFound) && o.CreateIfMissing && o.Mode == stream.ModeReadWrite && attempt < 3 {
			if err := s.Create(ctx, name); err != nil && !errors.Is(err, stream.ErrAlreadyExists) {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		var st stream.DriverStream
		if o.Mode == stream.ModeReadOnly {
			st, err = s.openReader(ctx, l)
		} else {
			st, err = s.openWriter(ctx, l, o.Epoch)
		}
		if errors.Is(err, errDeleted) {
			// Deleted meanwhile (maybe recreated), or a Delete that
			// stopped between its delete manifest and its tombstone:
			// a read-write open finishes it, so that the name can be
			// created again (a read-only open writes nothing).
			if o.Mode == stream.ModeReadWrite {
				if _, ferr := s.finishDelete(ctx, l, n); ferr != nil {
					return nil, ferr
				}
			}
			if attempt < 3 {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}

func (s *Store) openWriter(ctx context.Context, l layout, epoch uint64) (*writer, error) {
	self, c, err := s.openSession(ctx, l, epoch)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: chunked store (%s)", stream.ErrClosed, s.opts.Driver)
	}
	w := newWriter(s, l, self, c)
	s.sessions[w] = true
	s.opts.Logger.Debug("chunked: opened", "stream", l.name, "session", self.String(), "next", c.Tail.Next)
	return w, nil
}

func (s *Store) sessionDone(w *writer) {
	s.mu.Lock()
	delete(s.sessions, w)
	s.mu.Unlock()
}

// Delete implements stream.DriverStore: fence the incarnation with a delete
// manifest (the largest session), link a tombstone into the generation
// chain, then remove the incarnation's chunks. Its manifests stay: they
// are what fences every old holder and opener (docs/engine.md, "Delete").
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	l, n, err := s.live(ctx, name)
	if err != nil {
		return err
	}
	v, m, err := s.latestManifest(ctx, l)
	if err != nil {
		return err
	}
	for m.Kind != manDelete {
		dm := &manifest{Kind: manDelete, Owner: deleteSession, PutID: s.newPutID(), Start: m.Start,
			IdxEnd: m.IdxEnd, IdxNext: m.IdxNext, IdxSess: m.IdxSess, Pages: m.Pages, Index: m.Index}
		won, other, err := s.putManifest(ctx, l, v+1, dm)
		if err != nil {
			return fmt.Errorf("stream %q: delete: %w", name, err)
		}
		v++
		if won {
			break
		}
		m = other
	}
	if err := s.linkTombstone(ctx, l, n); err != nil {
		return fmt.Errorf("stream %q: delete: %w", name, err)
	}
	s.removeObjects(ctx, l, true)
	s.sweepLater(l)
	return nil
}

// linkTombstone links a tombstone after generation n, the live generation
// of incarnation l, whose delete manifest exists. ErrAlreadyExists counts
// as done: a concurrent Delete, or the completion of one, linked it (a
// Create never links after a live generation: it finishes the Delete
// first).
func (s *Store) linkTombstone(ctx context.Context, l layout, n uint64) error {
	err := s.putIfAbsent(ctx, genKey(l.name, n+1), encodeGeneration(generation{Kind: genTombstone}, genSeed(l.name)))
	if err != nil && !errors.Is(err, stream.ErrAlreadyExists) {
		return err
	}
	return nil
}

// finishDelete completes a Delete of incarnation l (live generation n)
// that stopped after its delete manifest (the point from which the
// incarnation is deleted) and before its tombstone (a failed or timed-out
// put, a crash): it links the tombstone and removes the incarnation's
// objects in the background. done is false when the newest manifest of l
// is not the delete manifest, i.e. l is live.
func (s *Store) finishDelete(ctx context.Context, l layout, n uint64) (done bool, err error) {
	_, m, err := s.latestManifest(ctx, l)
	if err != nil || m.Kind != manDelete {
		return false, err
	}
	if err := s.linkTombstone(ctx, l, n); err != nil {
		return false, fmt.Errorf("stream %q: finishing its delete: %w", l.name, err)
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.gcs.Add(1)
	}
	s.mu.Unlock()
	if !closed {
		go func() {
			defer s.gcs.Done()
			s.removeObjects(s.ctx, l, true)
		}()
		s.sweepLater(l)
	}
	return true, nil
}

// sweepLater removes a deleted incarnation's objects (but its manifests)
// once more after 2 × OpTimeout: a stale writer's chunk put already in
// flight when the delete fence landed may still land after the first
// removal pass (it is never read: the incarnation is fenced) and would
// otherwise stay on the backend for good. Each put is bounded by
// OpTimeout, so twice that covers them. A timer, not a goroutine, waits;
// if the Store closes first, Close runs the pass.
func (s *Store) sweepLater(l layout) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // a Delete racing Close: its own removal pass has run
	}
	var t *time.Timer
	// The callback takes mu first, so it sees t in s.sweeps.
	t = time.AfterFunc(2*s.opts.OpTimeout, func() {
		s.mu.Lock()
		_, mine := s.sweeps[t]
		delete(s.sweeps, t)
		if mine {
			s.gcs.Add(1)
		}
		s.mu.Unlock()
		if !mine {
			return // Close took it
		}
		defer s.gcs.Done()
		s.removeObjects(s.ctx, l, true)
	})
	s.sweeps[t] = l
}

// runPendingSweeps runs, at Close, the sweeps whose timers have not taken
// them (the Storage is still open).
func (s *Store) runPendingSweeps(pending []layout) {
	for _, l := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.OpTimeout)
		s.removeObjects(ctx, l, true)
		cancel()
	}
}

// removeObjects deletes an incarnation's objects; keepManifests leaves its
// manifests (the delete fence) in place.
func (s *Store) removeObjects(ctx context.Context, l layout, keepManifests bool) {
	after := ""
	for {
		var keys []string
		err := s.call(ctx, "list", l.prefix, func(ctx context.Context) error {
			k, err := s.st.List(ctx, l.prefix, after, 1000)
			keys = k
			return err
		})
		if err != nil || len(keys) == 0 {
			if err != nil {
				s.opts.Logger.Warn("chunked: removing objects", "stream", l.name, "prefix", l.prefix, "err", err)
			}
			return
		}
		after = keys[len(keys)-1]
		var del []string
		for _, k := range keys {
			if !keepManifests || !strings.HasPrefix(k, l.prefix+manDir) {
				del = append(del, k)
			}
		}
		if len(del) == 0 {
			continue
		}
		if err := s.call(ctx, "delete", l.prefix, func(ctx context.Context) error { return s.st.Delete(ctx, del) }); err != nil {
			s.opts.Logger.Warn("chunked: removing objects", "stream", l.name, "prefix", l.prefix, "err", err)
			return
		}
	}
}

// List implements stream.DriverStore. It is the one caller of Storage.List
// besides GC and Delete.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-') {
			return []string{}, nil // no stream name can start with it
		}
	}
	dir := prefix[:strings.LastIndex(prefix, "/")+1]
	if strings.HasPrefix(dir, "/") || strings.Contains(dir, "//") {
		return []string{}, nil
	}
	gens := map[string]uint64{}
	after := ""
	for {
		var keys []string
		err := s.call(ctx, "list", dir, func(ctx context.Context) error {
			k, err := s.st.List(ctx, dir, after, 1000)
			keys = k
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			break
		}
		after = keys[len(keys)-1]
		for _, k := range keys {
			name, n, ok := nameFromGenKey(k)
			if !ok || !strings.HasPrefix(name, prefix) || stream.ValidateName(name) != nil {
				continue
			}
			if cur, seen := gens[name]; !seen || n > cur {
				gens[name] = n
			}
		}
	}
	out := []string{}
	for name := range gens {
		// The newest generation decides; probe past the listed one too.
		_, g, found, err := s.currentGen(ctx, name)
		if errors.Is(err, stream.ErrCorrupt) {
			// Unreadable as this stream's (an object written under
			// another name, such as another prefix's store): list the
			// name; opening it reports the corruption.
			s.opts.Logger.Warn("chunked: listing a stream whose generation does not check", "stream", name, "err", err)
			out = append(out, name)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !found || g.Kind != genLive {
			continue
		}
		// A Delete that stopped before its tombstone: the delete manifest
		// already made the stream deleted.
		_, m, err := s.latestManifest(ctx, newLayout(name, g.Inc))
		if errors.Is(err, stream.ErrCorrupt) {
			s.opts.Logger.Warn("chunked: listing a stream whose manifest does not check", "stream", name, "err", err)
			out = append(out, name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", name, err)
		}
		if m.Kind != manDelete {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Close implements stream.DriverStore: open sessions end (their unacked appends
// fail with ErrClosed), background GC stops, and the Storage is closed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%w: chunked store (%s)", stream.ErrClosed, s.opts.Driver)
	}
	s.closed = true
	ws := make([]*writer, 0, len(s.sessions))
	for w := range s.sessions {
		ws = append(ws, w)
	}
	var sweeps []layout
	for t, l := range s.sweeps {
		t.Stop()
		sweeps = append(sweeps, l)
	}
	clear(s.sweeps)
	s.mu.Unlock()
	s.cancel()
	for _, w := range ws {
		w.imu.Lock()
		w.wakeLocked() // a parked session ends now (it sees the store closed)
		w.imu.Unlock()
		<-w.done
	}
	s.gcs.Wait()
	s.runPendingSweeps(sweeps)
	return s.st.Close()
}

// BackendStats implements stream.StatsReporter: the Storage's request
// counts when it keeps them (StatsReporter), else an error matching
// errors.ErrUnsupported.
func (s *Store) BackendStats(ctx context.Context) (RequestStats, error) {
	r, ok := s.st.(StatsReporter)
	if !ok {
		return RequestStats{}, fmt.Errorf("%s: the storage does not count its requests: %w", s.opts.Driver, errors.ErrUnsupported)
	}
	return r.RequestStats(), nil
}

var _ stream.StatsReporter = (*Store)(nil)
