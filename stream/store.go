package stream

import "context"

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

// Store is one backend namespace of streams. Its methods are safe for
// concurrent use.
type Store interface {
	// Info returns the driver's identity, limits and capabilities.
	Info() Info
	// Create creates an empty stream; ErrAlreadyExists if it exists.
	Create(ctx context.Context, name string) error
	// Open opens a stream. A read-write open fences every older session.
	Open(ctx context.Context, name string, opts OpenOptions) (Stream, error)
	// Delete removes the stream and all its data; open sessions on it are
	// fenced. ErrNotFound if it does not exist. A session opened before
	// the Delete may still answer a Fetch with batches of the deleted
	// stream that it holds (cached, or below what it knows): what it
	// returns is stale, never wrong, and a Fetch past what it knows fails.
	Delete(ctx context.Context, name string) error
	// List returns the names of the streams that start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Close releases the store. It does not fence or close streams'
	// backend state; later calls fail with ErrClosed.
	Close() error
}

// Stream is one open session on a stream. Its methods are safe for concurrent
// use.
type Stream interface {
	// Name is the stream's name.
	Name() string
	// Epoch is the epoch this session opened with (0 for read-only).
	Epoch() uint64
	// Append starts appending b and returns at once. Offsets are assigned
	// in call order; futures complete in call order; a successful
	// completion means the batch is durable on the backend. When one append
	// fails, every later in-flight append fails too. ctx governs only the
	// admission of the append: if it is done before the append is accepted,
	// the future fails with ctx.Err() and no offset is used.
	//
	// Buffer ownership: the stream may keep a reference to b.Payload and
	// b.Properties until the future completes, so the caller must not
	// modify them before then; once it completes (either way) the stream
	// holds no reference to them and the caller may reuse the buffer.
	Append(ctx context.Context, b Batch) *AppendFuture
	// Fetch returns whole batches overlapping [start, end), in order, up to
	// about maxBytes of Batch.Size (always at least one batch if any
	// exists). end beyond NextOffset is clamped; maxBytes <= 0 means
	// Info.MaxFetchBytes. start < StartOffset or start > NextOffset is
	// ErrOffsetOutOfRange; start == NextOffset returns no batches.
	Fetch(ctx context.Context, start, end int64, maxBytes int) ([]Batch, error)
	// Trim moves the start offset forward to newStart (lower values are a
	// no-op) durably. newStart > NextOffset is ErrOffsetOutOfRange.
	Trim(ctx context.Context, newStart int64) error
	// StartOffset is the first offset that may be fetched.
	StartOffset() int64
	// NextOffset is the end of acknowledged data: the offset the next
	// append will get. For a read-only session it is as of the last Fetch.
	NextOffset() int64
	// Close waits for in-flight appends and releases the session; it does
	// not fence. Later calls fail with ErrClosed.
	Close() error
}

// NoEnd as the end of a Fetch means "up to NextOffset".
const NoEnd int64 = 1<<63 - 1

// Opener opens a Store from a driver config document (JSON or YAML; it may
// hold secrets). Every driver package exports one as its Open function, and
// a driver's plugin binary is plugin.Serve(thatdriver.Open).
type Opener func(ctx context.Context, config []byte) (Store, error)
