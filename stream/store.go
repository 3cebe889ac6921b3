package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// Mode says how a stream is opened.
type Mode int

const (
	// ModeReadWrite opens the stream for appends and trims and fences every
	// older session.
	ModeReadWrite Mode = iota
	// ModeReadOnly opens the stream for fetches only; it never fences.
	ModeReadOnly
)

func (m Mode) String() string {
	switch m {
	case ModeReadWrite:
		return "read-write"
	case ModeReadOnly:
		return "read-only"
	}
	return "invalid-mode"
}

// OpenOptions are the arguments of Store.Open.
type OpenOptions struct {
	// Epoch of a read-write open. It must be >= the stored epoch, or Open
	// fails with ErrFenced. Ignored by read-only opens.
	Epoch uint64
	// Mode is ModeReadWrite (the zero value) or ModeReadOnly.
	Mode Mode
	// CreateIfMissing creates the stream when it does not exist (read-write
	// opens only). Without it Open of a missing stream is ErrNotFound.
	CreateIfMissing bool
}

// Store is one backend namespace of streams: the portable type every host
// programs against, over a DriverStore that an implementation provides
// (NewStore). Its methods are safe for concurrent use.
//
// Store and Stream are the front door of the contract: the checks every
// implementation would otherwise repeat happen here, once, before a call
// reaches the driver. A bad name (ValidateName), a nil context, a done
// context, a bad open mode and any call after Close fail here with the
// contract's error, naming the stream; a Stream adds the batch limits of
// Info (Info.CheckBatch), read-only writes, Fetch arguments and its own
// closed state. A driver that forgets one of these checks is still safe
// behind the front door. Errors a driver returns without the stream's name
// are wrapped with it (except an Append's, which reach the caller as the
// driver completes the future).
type Store struct {
	d      DriverStore
	closed atomic.Bool
}

// NewStore returns the Store over d, as sql.OpenDB returns a *sql.DB over a
// driver connector. The Store owns d: Close closes it.
func NewStore(d DriverStore) *Store { return &Store{d: d} }

// Driver returns the DriverStore under s, for a host that looks for an
// optional interface of the driver (such as a health report) by type
// assertion. Calls made on it directly bypass the front door's checks.
func (s *Store) Driver() DriverStore { return s.d }

// Info returns the driver's identity, limits and capabilities.
func (s *Store) Info() Info { return s.d.Info() }

// Create creates an empty stream; ErrAlreadyExists if it exists.
func (s *Store) Create(ctx context.Context, name string) error {
	if err := s.admit(ctx, name); err != nil {
		return err
	}
	return named(name, s.d.Create(ctx, name))
}

// Open opens a stream. A read-write open fences every older session.
func (s *Store) Open(ctx context.Context, name string, opts OpenOptions) (*Stream, error) {
	if err := s.admit(ctx, name); err != nil {
		return nil, err
	}
	if opts.Mode != ModeReadWrite && opts.Mode != ModeReadOnly {
		return nil, fmt.Errorf("%w: open stream %q: unknown mode %d", ErrInvalidArgument, name, opts.Mode)
	}
	info := s.d.Info()
	ds, err := s.d.Open(ctx, name, opts)
	if err != nil {
		return nil, named(name, err)
	}
	if ds == nil {
		return nil, fmt.Errorf("%w: open stream %q: the %s driver returned no session", ErrUnavailable, name, info.Driver)
	}
	return &Stream{d: ds, name: name, mode: opts.Mode, info: info}, nil
}

// Delete removes the stream and all its data; open sessions on it are
// fenced. ErrNotFound if it does not exist. A session opened before the
// Delete may still answer a Fetch with batches of the deleted stream that it
// holds (cached, or below what it knows): what it returns is stale, never
// wrong, and a Fetch past what it knows fails.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.admit(ctx, name); err != nil {
		return err
	}
	return named(name, s.d.Delete(ctx, name))
}

// List returns the names of the streams that start with prefix, sorted.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.usable(ctx, "list"); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	return s.d.List(ctx, prefix)
}

// Close releases the store and closes its driver. It does not fence or
// close streams' backend state; later calls, a second Close included, fail
// with ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("%w: %s store", ErrClosed, s.d.Info().Driver)
	}
	return s.d.Close()
}

// BackendStats returns the requests the store made to its backend since it
// was opened, when its driver counts them (StatsReporter); otherwise an
// error matching errors.ErrUnsupported.
func (s *Store) BackendStats(ctx context.Context) (RequestStats, error) {
	if err := s.usable(ctx, "backend stats"); err != nil {
		return RequestStats{}, err
	}
	r, ok := s.d.(StatsReporter)
	if !ok {
		return RequestStats{}, fmt.Errorf("backend stats of the %s store: %w", s.d.Info().Driver, errors.ErrUnsupported)
	}
	return r.BackendStats(ctx)
}

// usable fails for a nil or done ctx and a closed store.
func (s *Store) usable(ctx context.Context, what string) error {
	if ctx == nil {
		return fmt.Errorf("%w: %s: nil context", ErrInvalidArgument, what)
	}
	if s.closed.Load() {
		return fmt.Errorf("%w: %s on a closed %s store", ErrClosed, what, s.d.Info().Driver)
	}
	return ctx.Err()
}

// admit runs the checks of a call on the stream name.
func (s *Store) admit(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return named(name, s.usable(ctx, "stream "+strconv.Quote(name)))
}

// Stream is one open session on a stream, over the DriverStream its Store's
// driver opened. Its methods are safe for concurrent use.
type Stream struct {
	d      DriverStream
	name   string
	mode   Mode
	info   Info // the store's Info at open: the session's limits
	closed atomic.Bool
}

// Driver returns the DriverStream under s. Calls made on it directly bypass
// the front door's checks.
func (s *Stream) Driver() DriverStream { return s.d }

// Name is the stream's name.
func (s *Stream) Name() string { return s.name }

// Epoch is the epoch this session opened with (0 for read-only).
func (s *Stream) Epoch() uint64 { return s.d.Epoch() }

// Append starts appending b and returns at once. Offsets are assigned in
// call order; futures complete in call order; a successful completion means
// the batch is durable on the backend. When one append fails, every later
// in-flight append fails too. ctx governs only the admission of the append:
// if it is done before the append is accepted, the future fails with
// ctx.Err() and no offset is used. A batch outside the Info limits
// (Info.CheckBatch) fails with no offset used.
//
// Buffer ownership: the stream may keep a reference to b.Payload and
// b.Properties until the future completes, so the caller must not modify
// them before then; once it completes (either way) the stream holds no
// reference to them and the caller may reuse the buffer.
func (s *Stream) Append(ctx context.Context, b Batch) *AppendFuture {
	if err := s.writable(ctx, "append to"); err != nil {
		return FailedAppend(err)
	}
	if err := s.info.CheckBatch(b); err != nil {
		return FailedAppend(fmt.Errorf("append to stream %q: %w", s.name, err))
	}
	if f := s.d.Append(ctx, b); f != nil {
		return f
	}
	return FailedAppend(fmt.Errorf("%w: append to stream %q: the %s driver returned no future", ErrUnavailable, s.name, s.info.Driver))
}

// AppendFill is Append of b with a payload of n bytes that fill writes
// (b.Payload and its supplied checksum are unused), on a driver that builds
// its batches in its own buffers (Filler): fill writes straight into them,
// saving a copy, and returns the CRC-32C of what it wrote, which stands as
// the batch's supplied checksum (a wrong one makes the batch read
// ErrCorrupt, never wrong bytes). fill is called once, before AppendFill
// returns, unless the append fails first. On another driver, or for a batch
// the driver would not write in place, it returns false and appends
// nothing: the caller builds the payload and calls Append.
func (s *Stream) AppendFill(ctx context.Context, b Batch, n int, fill func(p []byte) uint32) (*AppendFuture, bool) {
	fl, ok := s.d.(Filler)
	if !ok || n < 0 {
		return nil, false
	}
	b.Payload, b.PayloadChecksum, b.PayloadChecksumSet = nil, 0, false
	if err := s.writable(ctx, "append to"); err != nil {
		return FailedAppend(err), true
	}
	if err := s.info.checkBatch(b, n); err != nil {
		return FailedAppend(fmt.Errorf("append to stream %q: %w", s.name, err)), true
	}
	f, ok := fl.AppendFill(ctx, b, n, fill)
	if ok && f == nil {
		return FailedAppend(fmt.Errorf("%w: append to stream %q: the %s driver returned no future", ErrUnavailable, s.name, s.info.Driver)), true
	}
	return f, ok
}

// Flush hints that the caller appends nothing more for now: a driver that
// holds appends back to batch them (Flusher) may send what it holds at
// once. It does not wait and fails nothing; on a driver that does not
// batch, and on a closed or read-only session, it does nothing.
func (s *Stream) Flush() {
	if f, ok := s.d.(Flusher); ok && s.mode == ModeReadWrite && !s.closed.Load() {
		f.Flush()
	}
}

// Fetch returns whole batches overlapping [start, end), in order, up to
// about maxBytes of Batch.Size (always at least one batch if any exists).
// end beyond NextOffset is clamped; maxBytes <= 0 means Info.MaxFetchBytes,
// and so does a larger maxBytes. start < StartOffset or start > NextOffset
// is ErrOffsetOutOfRange; start == NextOffset returns no batches.
func (s *Stream) Fetch(ctx context.Context, start, end int64, maxBytes int) ([]Batch, error) {
	if err := s.usable(ctx, "fetch from"); err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: fetch from stream %q at %d: offsets start at 0", ErrOffsetOutOfRange, s.name, start)
	}
	if maxBytes <= 0 || maxBytes > s.info.MaxFetchBytes && s.info.MaxFetchBytes > 0 {
		maxBytes = s.info.MaxFetchBytes
	}
	bs, err := s.d.Fetch(ctx, start, end, maxBytes)
	if err != nil {
		return nil, named(s.name, err)
	}
	return bs, nil
}

// Trim moves the start offset forward to newStart (lower values are a
// no-op) durably. newStart > NextOffset is ErrOffsetOutOfRange.
func (s *Stream) Trim(ctx context.Context, newStart int64) error {
	if err := s.writable(ctx, "trim"); err != nil {
		return err
	}
	return named(s.name, s.d.Trim(ctx, newStart))
}

// StartOffset is the first offset that may be fetched.
func (s *Stream) StartOffset() int64 { return s.d.StartOffset() }

// NextOffset is the end of acknowledged data: the offset the next append
// will get. For a read-only session it is as of the last Fetch.
func (s *Stream) NextOffset() int64 { return s.d.NextOffset() }

// Close waits for in-flight appends and releases the session; it does not
// fence. Later calls, a second Close included, fail with ErrClosed.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("%w: stream %q", ErrClosed, s.name)
	}
	return named(s.name, s.d.Close())
}

// usable fails for a nil or done ctx and a closed session.
func (s *Stream) usable(ctx context.Context, what string) error {
	if ctx == nil {
		return fmt.Errorf("%w: %s stream %q: nil context", ErrInvalidArgument, what, s.name)
	}
	if s.closed.Load() {
		return fmt.Errorf("%w: %s stream %q", ErrClosed, what, s.name)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s stream %q: %w", what, s.name, err)
	}
	return nil
}

// writable is usable for a write: a read-only session refuses it.
func (s *Stream) writable(ctx context.Context, what string) error {
	if err := s.usable(ctx, what); err != nil {
		return err
	}
	if s.mode == ModeReadOnly {
		return fmt.Errorf("%w: %s stream %q: the session is read-only", ErrInvalidArgument, what, s.name)
	}
	return nil
}

// named wraps err with the stream's name unless its message holds it.
func named(name string, err error) error {
	if err == nil || strings.Contains(err.Error(), name) {
		return err
	}
	return fmt.Errorf("stream %q: %w", name, err)
}

// NoEnd as the end of a Fetch means "up to NextOffset".
const NoEnd int64 = 1<<63 - 1

// Opener opens a Store from a driver config document (JSON or YAML; it may
// hold secrets). Every driver package exports one as its Open function, and
// a driver's plugin binary is plugin.Serve(thatdriver.Open).
type Opener func(ctx context.Context, config []byte) (*Store, error)
