package memory

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/stratastream/strata/stream"
)

var (
	registryMu sync.Mutex
	registry   = map[string]*namespace{}
)

// newStore returns the driver for c.
func newStore(c Config) *Store {
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = stream.DefaultMaxBatchBytes
	}
	var ns *namespace
	if c.Namespace == "" {
		ns = newNamespace()
	} else {
		registryMu.Lock()
		ns = registry[c.Namespace]
		if ns == nil {
			ns = newNamespace()
			registry[c.Namespace] = ns
		}
		registryMu.Unlock()
	}
	return &Store{ns: ns, info: stream.Info{
		Driver:        DriverName,
		Version:       Version,
		MaxBatchBytes: c.MaxBatchBytes,
		MaxProperties: stream.DefaultMaxProperties,
		MaxFetchBytes: stream.DefaultMaxFetchBytes,
		ReadOnlyOpen:  true,
	}}
}

type namespace struct {
	mu      sync.Mutex
	streams map[string]*state
}

func newNamespace() *namespace { return &namespace{streams: map[string]*state{}} }

// state is one incarnation of a stream. Every field is guarded by mu.
type state struct {
	mu          sync.Mutex
	name        string
	incarnation uuid.UUID
	epoch       uint64 // highest epoch opened read-write
	session     uint64 // id of the newest read-write session
	deleted     bool
	start, next int64
	batches     []stored // sorted by base; batches wholly below start are dropped
}

type stored struct {
	b   stream.Batch
	crc uint32
}

// Store is the memory driver: a stream.DriverStore.
type Store struct {
	ns     *namespace
	info   stream.Info
	mu     sync.Mutex
	closed bool
}

var _ stream.DriverStore = (*Store)(nil)

// Info implements stream.DriverStore.
func (s *Store) Info() stream.Info { return s.info }

func (s *Store) check(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: memory store", stream.ErrClosed)
	}
	return nil
}

// Create implements stream.DriverStore.
func (s *Store) Create(ctx context.Context, name string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.ns.mu.Lock()
	defer s.ns.mu.Unlock()
	if _, ok := s.ns.streams[name]; ok {
		return fmt.Errorf("%w: stream %q", stream.ErrAlreadyExists, name)
	}
	s.ns.streams[name] = &state{name: name, incarnation: uuid.New()}
	return nil
}

// Open implements stream.DriverStore.
func (s *Store) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if opts.Mode == stream.ModeReadOnly && opts.CreateIfMissing {
		return nil, fmt.Errorf("%w: open %q: CreateIfMissing needs a read-write open", stream.ErrInvalidArgument, name)
	}
	s.ns.mu.Lock()
	st := s.ns.streams[name]
	if st == nil && opts.CreateIfMissing {
		st = &state{name: name, incarnation: uuid.New()}
		s.ns.streams[name] = st
	}
	s.ns.mu.Unlock()
	if st == nil {
		return nil, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	h := &handle{store: s, st: st, mode: opts.Mode}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.deleted {
		return nil, fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	if opts.Mode == stream.ModeReadWrite {
		if opts.Epoch < st.epoch {
			return nil, fmt.Errorf("%w: open %q at epoch %d: stream is at epoch %d", stream.ErrFenced, name, opts.Epoch, st.epoch)
		}
		st.epoch = opts.Epoch
		st.session++
		h.epoch, h.session = opts.Epoch, st.session
	}
	return h, nil
}

// Delete implements stream.DriverStore.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.ns.mu.Lock()
	st := s.ns.streams[name]
	delete(s.ns.streams, name)
	s.ns.mu.Unlock()
	if st == nil {
		return fmt.Errorf("%w: stream %q", stream.ErrNotFound, name)
	}
	st.mu.Lock()
	st.deleted, st.batches = true, nil
	st.mu.Unlock()
	return nil
}

// List implements stream.DriverStore.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.ns.mu.Lock()
	defer s.ns.mu.Unlock()
	var names []string
	for n := range s.ns.streams {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Close implements stream.DriverStore. Streams opened from the store fail with
// ErrClosed afterwards; the namespace's data stays.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: memory store", stream.ErrClosed)
	}
	s.closed = true
	return nil
}

// handle is one session on a stream.
type handle struct {
	store   *Store
	st      *state
	mode    stream.Mode
	epoch   uint64
	session uint64

	mu     sync.Mutex
	closed bool
}

func (h *handle) Name() string  { return h.st.name }
func (h *handle) Epoch() uint64 { return h.epoch }

func (h *handle) check(ctx context.Context) error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, h.st.name)
	}
	return h.store.check(ctx)
}

// fenced reports why a write by h must fail, or nil. st.mu is held.
func (h *handle) fenced(op string) error {
	switch {
	case h.mode != stream.ModeReadWrite:
		return fmt.Errorf("%w: %s on %q: stream is open read-only", stream.ErrInvalidArgument, op, h.st.name)
	case h.st.deleted:
		return fmt.Errorf("%w: %s on %q: stream was deleted", stream.ErrFenced, op, h.st.name)
	case h.st.session != h.session:
		return fmt.Errorf("%w: %s on %q: session at epoch %d superseded (stream at epoch %d)", stream.ErrFenced, op, h.st.name, h.epoch, h.st.epoch)
	}
	return nil
}

func (h *handle) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	if err := h.check(ctx); err != nil {
		return stream.FailedAppend(err)
	}
	// The stored batch owns its bytes: the caller may reuse b.Payload.
	s := stored{b: stream.Batch{
		Count:      b.Count,
		Timestamp:  b.Timestamp,
		Properties: maps.Clone(b.Properties),
		Payload:    bytes.Clone(b.Payload),
	}}
	if s.b.Payload == nil {
		s.b.Payload = []byte{}
	}
	// The checksum travels with the batch and Fetch verifies it. A
	// checksum the caller supplied is trusted here (the copy is the only
	// pass over the payload); a wrong one is stored, so every Fetch of the
	// batch fails with ErrCorrupt and never returns it.
	s.crc = b.PayloadChecksum
	if !b.PayloadChecksumSet {
		s.crc = stream.Checksum(s.b.Payload)
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if err := h.fenced("append"); err != nil {
		return stream.FailedAppend(err)
	}
	s.b.BaseOffset = h.st.next
	h.st.next += int64(b.Count)
	h.st.batches = append(h.st.batches, s)
	return doneAppend(s.b.BaseOffset, h.st.next)
}

func doneAppend(base, next int64) *stream.AppendFuture {
	f, complete := stream.NewAppendFuture()
	complete(stream.AppendResult{BaseOffset: base, NextOffset: next}, nil)
	return f
}

func (h *handle) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]stream.Batch, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	if end < start {
		return nil, fmt.Errorf("%w: fetch %q: end %d < start %d", stream.ErrInvalidArgument, h.st.name, end, start)
	}
	if maxBytes <= 0 || maxBytes > h.store.info.MaxFetchBytes {
		maxBytes = h.store.info.MaxFetchBytes
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if h.st.deleted {
		return nil, fmt.Errorf("%w: stream %q was deleted", stream.ErrNotFound, h.st.name)
	}
	if start < h.st.start || start > h.st.next {
		return nil, fmt.Errorf("%w: fetch %q at %d: stream holds [%d, %d)", stream.ErrOffsetOutOfRange, h.st.name, start, h.st.start, h.st.next)
	}
	bs := h.st.batches
	i := sort.Search(len(bs), func(i int) bool { return bs[i].b.EndOffset() > start })
	var out []stream.Batch
	size := 0
	for ; i < len(bs) && bs[i].b.BaseOffset < end; i++ {
		s := bs[i]
		if len(out) > 0 && size+s.b.Size() > maxBytes {
			break
		}
		if stream.Checksum(s.b.Payload) != s.crc {
			return nil, fmt.Errorf("%w: stream %q batch at offset %d: CRC32C mismatch", stream.ErrCorrupt, h.st.name, s.b.BaseOffset)
		}
		b := s.b
		b.Payload = bytes.Clone(b.Payload)
		b.Properties = maps.Clone(b.Properties)
		out = append(out, b)
		size += s.b.Size()
	}
	return out, nil
}

func (h *handle) Trim(ctx context.Context, newStart int64) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if err := h.fenced("trim"); err != nil {
		return err
	}
	if newStart > h.st.next {
		return fmt.Errorf("%w: trim %q to %d: next offset is %d", stream.ErrOffsetOutOfRange, h.st.name, newStart, h.st.next)
	}
	if newStart <= h.st.start {
		return nil
	}
	h.st.start = newStart
	bs := h.st.batches
	i := sort.Search(len(bs), func(i int) bool { return bs[i].b.EndOffset() > newStart })
	h.st.batches = slices.Clone(bs[i:])
	return nil
}

func (h *handle) StartOffset() int64 {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.start
}

func (h *handle) NextOffset() int64 {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.next
}

func (h *handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("%w: stream %q", stream.ErrClosed, h.st.name)
	}
	h.closed = true
	return nil
}
