package wal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratastream/strata/stream"
)

// Store is a stream.DriverStore of virtual streams on a base stream.Store;
// a host wraps it with stream.NewStore, whose front door checks names,
// batches, contexts and the closed state. Its methods are safe for
// concurrent use.
type Store struct {
	base *stream.Store
	wals *stream.Store // where the WAL streams are: Options.WALStore, else base
	opts Options
	info stream.Info
	log  *slog.Logger
	sid  id

	mu      sync.Mutex
	closed  bool
	w       *writer             // the live WAL; nil until a stream claims one
	walSeq  int                 // WALs this session created
	dead    []*writer           // this session's ended WALs, deleted once nothing points in
	handles map[string]*vstream // read-write sessions by name
	claims  map[id]*claim       // claims on this session's WALs not yet released
	frozen  map[string]*frozenWAL

	compactNow chan compactReq
	stop       context.CancelFunc
	bgDone     chan struct{}
}

var _ stream.DriverStore = (*Store)(nil)

// NewStore returns a Store of virtual streams on base. The Store owns
// base: its Close closes base.
func NewStore(base *stream.Store, opts Options) (*Store, error) {
	bi := base.Info()
	walMax := bi.MaxBatchBytes
	if opts.WALStore != nil {
		if m := opts.WALStore.Info().MaxBatchBytes; m > 0 && (walMax <= 0 || m < walMax) {
			walMax = m
		}
	}
	o, err := opts.withDefaults(walMax)
	if err != nil {
		return nil, err
	}
	if err := stream.ValidateName(o.Prefix + "/x"); err != nil {
		return nil, fmt.Errorf("wal: Prefix %q: %w", o.Prefix, err)
	}
	info := bi
	info.Version = bi.Version + "+wal/1"
	if bi.MaxBatchBytes > 0 {
		info.MaxBatchBytes = bi.MaxBatchBytes - reserve(bi.MaxProperties)
		if info.MaxBatchBytes < 1024 {
			return nil, fmt.Errorf("wal: the base store's MaxBatchBytes %d leaves no room for a batch", bi.MaxBatchBytes)
		}
	}
	s := &Store{
		base: base, wals: base, opts: o, info: info, log: o.Logger,
		handles:    make(map[string]*vstream),
		claims:     make(map[id]*claim),
		frozen:     make(map[string]*frozenWAL),
		compactNow: make(chan compactReq),
		bgDone:     make(chan struct{}),
	}
	if o.WALStore != nil {
		s.wals = o.WALStore
	}
	s.sid = s.newID()
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.background(ctx)
	return s, nil
}

// reserve is what the layer's framing takes of a base batch: the WAL
// batch header and one entry's fields, or a V.data batch's.
func reserve(maxProps int) int { return 64 + entryOverhead + 6*max(maxProps, 0) }

func (s *Store) newID() id {
	if s.opts.NewID != nil {
		return s.opts.NewID()
	}
	var i id
	_, _ = rand.Read(i[:])
	return i
}

// Info returns the base's Info with the batch limit this layer leaves.
func (s *Store) Info() stream.Info { return s.info }

// Base returns the base store.
func (s *Store) Base() *stream.Store { return s.base }

// BackendStats reports the request counts of the base and of every WAL
// store of its own, summed.
func (s *Store) BackendStats(ctx context.Context) (stream.RequestStats, error) {
	r, err := s.base.BackendStats(ctx)
	if err != nil {
		return r, err
	}
	for _, ws := range s.walStores() {
		if ws == s.base {
			continue
		}
		w, err := ws.BackendStats(ctx)
		if err != nil {
			return r, err
		}
		r = stream.RequestStats{
			Puts: r.Puts + w.Puts, Gets: r.Gets + w.Gets, Heads: r.Heads + w.Heads,
			Lists: r.Lists + w.Lists, Deletes: r.Deletes + w.Deletes,
			BytesWritten: r.BytesWritten + w.BytesWritten, BytesRead: r.BytesRead + w.BytesRead,
			Retries: r.Retries + w.Retries, Errors: r.Errors + w.Errors,
		}
	}
	return r, nil
}

// walStores are the stores a WAL may be in: the WAL store, the former WAL
// stores, then the base when it is not the WAL store. A WAL stays where
// its session made it, and a name is only ever made in one store: WALs
// from before Options.WALStore was set, or changed, are found, fenced,
// read and swept where they are.
func (s *Store) walStores() []*stream.Store {
	out := append([]*stream.Store{s.wals}, s.opts.FormerWALStores...)
	if s.wals != s.base {
		out = append(out, s.base)
	}
	return out
}

// openWAL opens WAL name in the store that holds it: ErrNotFound if none
// does (it was never made there, or it was deleted: either way it holds
// nothing, as readWAL says).
func (s *Store) openWAL(ctx context.Context, name string, opts stream.OpenOptions) (*stream.Stream, error) {
	var err error
	for _, ws := range s.walStores() {
		var st *stream.Stream
		if st, err = ws.Open(ctx, name, opts); !errors.Is(err, stream.ErrNotFound) {
			return st, err
		}
	}
	return nil, err
}

// check fails once the store is closed. The front door (stream.Store) has
// checked the name, the context and the open mode.
func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return stream.ErrClosed
	}
	return nil
}

// internal says name is a WAL's, never a legacy stream's.
func (s *Store) internal(name string) bool { return strings.HasPrefix(name, s.opts.Prefix+"/") }

// Create creates an empty virtual stream.
func (s *Store) Create(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !s.internal(name) {
		if ok, err := s.legacyExists(ctx, name); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: stream %q", stream.ErrAlreadyExists, name)
		}
	}
	return s.base.Create(ctx, metaName(name))
}

// legacyExists says the base holds a stream of this very name: one written
// before stream sets were turned on, which this layer serves as it is.
func (s *Store) legacyExists(ctx context.Context, name string) (bool, error) {
	st, err := s.base.Open(ctx, name, stream.OpenOptions{Mode: stream.ModeReadOnly})
	switch {
	case err == nil:
		_ = st.Close()
		return true, nil
	case errors.Is(err, stream.ErrNotFound):
		return false, nil
	}
	return false, err
}

// Open opens a virtual stream.
func (s *Store) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	switch opts.Mode {
	case stream.ModeReadWrite:
		return s.openRW(ctx, name, opts)
	case stream.ModeReadOnly:
		return s.openRO(ctx, name)
	}
	return nil, fmt.Errorf("%w: open mode %d", stream.ErrInvalidArgument, opts.Mode)
}

// Delete removes a virtual stream: its meta stream, then the data streams
// of its incarnations listed before it (the current one's, and any left by
// a Delete that stopped halfway). An incarnation created after the meta
// stream is gone creates its data stream later still, under a name of its
// own, so no Delete removes the data of a stream that outlives it.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	listed, err := s.base.List(ctx, dataPrefix(name))
	if err != nil {
		return err
	}
	if hashed(name) {
		listed = append(listed, legacyDataName(name)) // another prefix
	}
	err = s.base.Delete(ctx, metaName(name))
	if errors.Is(err, stream.ErrNotFound) && !s.internal(name) {
		if lerr := s.base.Delete(ctx, name); !errors.Is(lerr, stream.ErrNotFound) {
			return lerr
		}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	h := s.handles[name]
	s.mu.Unlock()
	if h != nil {
		h.fenceLocal(fmt.Errorf("%w: stream %q was deleted", stream.ErrFenced, name))
		h.releaseClaims()
	}
	has := make(map[string]bool, len(listed))
	for _, n := range listed {
		has[n] = true
	}
	for _, d := range listed {
		// V+"."+tag+".d" is also the legacy data name of a stream named
		// V+"."+tag, if one has that meta stream.
		if !isDataOf(d, name) || d != legacyDataName(name) && has[strings.TrimSuffix(d, dataSuffix)+metaSuffix] {
			continue
		}
		if derr := s.base.Delete(ctx, d); derr != nil && !errors.Is(derr, stream.ErrNotFound) {
			s.log.Warn("wal: deleting a data stream failed; the next Delete of the name removes it", "stream", name, "data", d, "err", derr)
		}
	}
	return nil
}

// List returns the virtual streams whose names start with prefix, sorted.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, stream.ErrClosed
	}
	bp := prefix
	if len(bp) > hashedKeep {
		bp = bp[:hashedKeep]
	}
	names, err := s.base.List(ctx, bp)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		switch {
		case isHashedMeta(n):
			full, err := s.hashedName(ctx, n)
			if err != nil {
				return nil, err
			}
			if full != "" && strings.HasPrefix(full, prefix) {
				out = append(out, full)
			}
		case strings.HasSuffix(n, metaSuffix):
			if v := strings.TrimSuffix(n, metaSuffix); strings.HasPrefix(v, prefix) {
				out = append(out, v)
			}
		case strings.HasSuffix(n, dataSuffix), s.internal(n):
		default:
			if strings.HasPrefix(n, prefix) {
				out = append(out, n) // a legacy stream
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// hashedName reads a long name back from its meta stream's records ("" if
// it has none yet and so cannot be named: Create of a long name writes
// one).
func (s *Store) hashedName(ctx context.Context, base string) (string, error) {
	st, err := s.base.Open(ctx, base, stream.OpenOptions{Mode: stream.ModeReadOnly})
	if errors.Is(err, stream.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer st.Close()
	bs, err := st.Fetch(ctx, st.StartOffset(), stream.NoEnd, 1)
	if err != nil || len(bs) == 0 {
		return "", err
	}
	rec, err := decodeRecord(bs[0].Payload)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", base, err)
	}
	return rec.name, nil
}

// Close stops the store: queued appends are flushed and in-flight ones
// completed, background work stops, and the base store closes. Streams
// opened from it fail with ErrClosed afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return stream.ErrClosed
	}
	s.closed = true
	w := s.w
	s.mu.Unlock()
	s.stop()
	<-s.bgDone
	if w != nil {
		w.close()
	}
	s.mu.Lock()
	dead := slices.Clone(s.dead)
	s.mu.Unlock()
	for _, d := range dead {
		d.close()
	}
	if w != nil {
		dead = append(dead, w)
	}
	s.dropUnclaimed(dead)
	for _, ws := range s.walStores() {
		if ws == s.base {
			continue
		}
		if err := ws.Close(); err != nil {
			s.log.Warn("wal: closing a WAL store", "err", err)
		}
	}
	return s.base.Close()
}

// dropUnclaimed deletes, at Close, the session's WALs that no claim names
// any more (every stream on them closed with a record naming no WAL), as
// GC does for ended WALs (W6): a clean shutdown leaves no WAL behind for
// the next session's sweep.
func (s *Store) dropUnclaimed(ws []*writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, w := range ws {
		if !s.unclaimed(ctx, w) {
			continue
		}
		if err := s.wals.Delete(ctx, w.name); err != nil && !errors.Is(err, stream.ErrNotFound) {
			s.log.Warn("wal: deleting an unclaimed WAL at close failed; a later sweep deletes it", "wal", w.name, "err", err)
		}
	}
}

// liveWAL returns the session's live WAL, creating a new one if there is
// none (at the first claim, and after a failed WAL append ended the last).
func (s *Store) liveWAL(ctx context.Context) (*writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, stream.ErrClosed
	}
	if s.w != nil {
		return s.w, nil
	}
	s.walSeq++
	name := fmt.Sprintf("%s/%s-%d", s.opts.Prefix, s.sid, s.walSeq)
	st, err := s.wals.Open(ctx, name, stream.OpenOptions{Epoch: walEpoch, CreateIfMissing: true})
	if err != nil {
		return nil, fmt.Errorf("wal: creating WAL %s: %w", name, err)
	}
	s.w = newWriter(s, name, s.sid, st)
	s.log.Debug("wal: new WAL", "wal", name)
	return s.w, nil
}

// walDied ends w as the live WAL (W7): the next claim starts a new one,
// and every stream claimed on w must settle through W3 before it appends
// again.
func (s *Store) walDied(w *writer) {
	s.mu.Lock()
	if s.w == w {
		s.w = nil
		s.dead = append(s.dead, w)
	}
	s.mu.Unlock()
	w.mu.Lock()
	var hs []*vstream
	for _, c := range w.claims {
		hs = append(hs, c.h)
	}
	err := w.err
	w.mu.Unlock()
	s.log.Info("wal: WAL ended; its streams settle before they append again", "wal", w.name, "err", err)
	for _, h := range hs {
		h.markBroken(err)
	}
}

// parseWALName returns the session id of a WAL named by this layer.
func (s *Store) parseWALName(name string) (id, bool) {
	var sid id
	rest, ok := strings.CutPrefix(name, s.opts.Prefix+"/")
	if !ok {
		return sid, false
	}
	hexPart, _, ok := strings.Cut(rest, "-")
	if !ok || len(hexPart) != 32 {
		return sid, false
	}
	if _, err := hex.Decode(sid[:], []byte(hexPart)); err != nil {
		return sid, false
	}
	return sid, true
}

// Compact runs one compaction and GC pass now and waits for it: every
// stream's acknowledged tail is copied to its data stream, the WALs are
// trimmed below what the meta records still name, and dead sessions' WALs
// that nothing names are deleted. Benchmarks and tests use it; the store
// runs passes on its own by size and age.
func (s *Store) Compact(ctx context.Context) error {
	return s.compactWith(ctx, passPlan{all: true})
}

// compactReq asks the background goroutine for a pass.
type compactReq struct {
	plan passPlan
	done chan error
}

// compactWith runs one pass of plan in the background goroutine, with the
// sweep, and waits for it.
func (s *Store) compactWith(ctx context.Context, plan passPlan) error {
	done := make(chan error, 1)
	select {
	case s.compactNow <- compactReq{plan: plan, done: done}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.bgDone:
		return stream.ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// background runs compaction, GC and the sweeper until the store closes.
func (s *Store) background(ctx context.Context) {
	defer close(s.bgDone)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	nextSweep := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-s.compactNow:
			err := s.pass(ctx, req.plan)
			if err == nil && s.opts.SweepInterval > 0 {
				err = s.sweep(ctx)
			}
			req.done <- err
		case <-tick.C:
			if plan, ok := s.due(); ok {
				if err := s.pass(ctx, plan); err != nil && ctx.Err() == nil {
					s.log.Warn("wal: compaction pass failed", "err", err)
				}
			}
			s.evictFrozen()
			if s.opts.SweepInterval > 0 && time.Now().After(nextSweep) {
				nextSweep = time.Now().Add(s.opts.SweepInterval)
				if err := s.sweep(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("wal: sweeping dead WALs failed", "err", err)
				}
			}
		}
	}
}

// Options returns the store's options with their defaults filled in.
func (s *Store) Options() Options { return s.opts }

// driverHealth is what a supervised plugin store reports of its driver
// process (stream/plugin's Supervisor; the broker reads it for readiness).
type driverHealth interface {
	DriverUp() bool
	DriverRestarts() int64
}

// DriverUp reports the base's driver health: true unless the base is a
// store whose driver process is down (being restarted).
func (s *Store) DriverUp() bool {
	if h, ok := s.base.Driver().(driverHealth); ok {
		return h.DriverUp()
	}
	return true
}

// DriverRestarts is how often the base's driver process was restarted (0
// for a base that has no process of its own).
func (s *Store) DriverRestarts() int64 {
	if h, ok := s.base.Driver().(driverHealth); ok {
		return h.DriverRestarts()
	}
	return 0
}
