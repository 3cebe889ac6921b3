package stream

import "errors"

// Sentinel errors of the contract. Drivers return them wrapped (with %w) so
// that the message names the stream, offset or backend object; callers match
// them with errors.Is. They survive the plugin boundary.
var (
	// ErrFenced: a newer session (higher epoch, or a later open of the same
	// epoch) owns the stream, or an open asked for an epoch lower than the
	// stored one.
	ErrFenced = errors.New("stream: fenced by a newer session")
	// ErrOffsetOutOfRange: an offset below the start offset or above the
	// next offset.
	ErrOffsetOutOfRange = errors.New("stream: offset out of range")
	// ErrNotFound: the stream does not exist.
	ErrNotFound = errors.New("stream: not found")
	// ErrAlreadyExists: Create of a stream that exists.
	ErrAlreadyExists = errors.New("stream: already exists")
	// ErrClosed: use of a closed Stream or Store.
	ErrClosed = errors.New("stream: closed")
	// ErrInvalidArgument: a bad name, an empty batch, a bad option, a
	// malformed message. Returned before any I/O.
	ErrInvalidArgument = errors.New("stream: invalid argument")
	// ErrBatchTooLarge: a batch above Info.MaxBatchBytes or with too many
	// properties.
	ErrBatchTooLarge = errors.New("stream: batch too large")
	// ErrUnavailable: transient backend trouble (backend down, timeout, dead
	// driver process). Retryable; for an append it means the outcome is
	// unknown until the stream is reopened and read.
	ErrUnavailable = errors.New("stream: unavailable")
	// ErrCorrupt: stored bytes failed their checksum or could not be decoded.
	// Never returned as data.
	ErrCorrupt = errors.New("stream: corrupt data")
)

// Sentinels lists every sentinel error, in a stable order. Transports use it
// to map errors to codes and back.
var Sentinels = []error{
	ErrFenced, ErrOffsetOutOfRange, ErrNotFound, ErrAlreadyExists, ErrClosed,
	ErrInvalidArgument, ErrBatchTooLarge, ErrUnavailable, ErrCorrupt,
}

// Sentinel returns the first sentinel of this package that err matches, or
// nil.
func Sentinel(err error) error {
	for _, s := range Sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}
