package stream

import "context"

// DriverStore is what an implementation of the contract provides: the
// narrow interface under Store, as database/sql/driver is under
// database/sql. Store (built by NewStore) does everything every
// implementation would otherwise repeat, before a call reaches the
// DriverStore: it validates names, refuses a nil or done context and use
// after Close, and names the stream in errors that do not. A DriverStore
// may repeat those checks but need not.
//
// The stream drivers (drivers/memory), the engine (stream/chunked), the
// plugin client (stream/plugin) and stream sets (stream/wal) are
// DriverStores, each returned to users wrapped by NewStore. Methods are
// called concurrently.
type DriverStore interface {
	// Info returns the driver's identity, limits and capabilities. Store
	// reads it on every Open (for the session's limits), never per append.
	Info() Info
	// Create creates an empty stream; ErrAlreadyExists if it exists.
	Create(ctx context.Context, name string) error
	// Open opens a stream. A read-write open fences every older session.
	// opts.Mode is ModeReadWrite or ModeReadOnly.
	Open(ctx context.Context, name string, opts OpenOptions) (DriverStream, error)
	// Delete removes the stream and all its data (see Store.Delete).
	Delete(ctx context.Context, name string) error
	// List returns the names of the streams that start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
	// Close releases the store. Store calls it once.
	Close() error
}

// DriverStream is one open session of a DriverStore, under Stream. Stream
// checks the batch against the Info the session was opened with, the
// context, the closed state and read-only writes before Append and Trim
// reach it, and passes Fetch a start >= 0 and a maxBytes in
// (0, Info.MaxFetchBytes]. Methods are called concurrently; the semantics
// of each are those of the Stream method of the same name.
type DriverStream interface {
	Name() string
	Epoch() uint64
	Append(ctx context.Context, b Batch) *AppendFuture
	Fetch(ctx context.Context, start, end int64, maxBytes int) ([]Batch, error)
	Trim(ctx context.Context, newStart int64) error
	StartOffset() int64
	NextOffset() int64
	// Close waits for in-flight appends and releases the session. Stream
	// calls it once.
	Close() error
}

// Filler is a DriverStream that builds batches in buffers of its own (as
// the engine, stream/chunked, builds its chunks) and can have a payload
// written straight into them (Stream.AppendFill), saving the caller a
// buffer and itself a copy. AppendFill is Append of b (whose Payload is
// unused) with the n payload bytes fill writes into p, len(p) == n; fill
// returns their CRC-32C, which the driver takes as the batch's supplied
// checksum (Batch.PayloadChecksum), unread. The driver calls fill once,
// before AppendFill returns, unless the append fails first; or it returns
// false without calling it, appending nothing, when it would not write
// this batch in place (the caller then appends it the usual way).
type Filler interface {
	AppendFill(ctx context.Context, b Batch, n int, fill func(p []byte) uint32) (*AppendFuture, bool)
}

// Flusher is a DriverStream that holds appends back to batch them with
// others (a linger, as the write-ahead stream sets of package wal do).
// Flush is a hint from the caller that it appends nothing more for now
// (a broker has started the appends of a whole request): the session may
// send what it holds at once instead of waiting out its linger. It does
// not wait, and every append completes as it would have.
type Flusher interface {
	Flush()
}
