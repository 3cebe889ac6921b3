package chunked

import (
	"context"

	"github.com/stratastream/strata/stream"
)

// Storage is the small interface a backend implements to get the whole
// Stream contract from the engine. Keys are '/'-separated paths of
// [A-Za-z0-9._/-] relative to the backend's root (bucket prefix, directory,
// container prefix); a backend maps them to its own names.
//
// Errors: ErrAlreadyExists, ErrNotFound and ErrUnavailable from package
// stream, wrapped with the key and backend involved. Any error that is not
// clearly "taken" or "absent" must be ErrUnavailable (or wrap it): the engine
// treats the outcome of such a put as unknown.
//
// Methods are safe for concurrent use, including from several processes or
// hosts on the same root.
type Storage interface {
	// PutIfAbsent atomically creates key with data, durable on return.
	// If key exists it returns stream.ErrAlreadyExists and changes nothing.
	// Exactly one of several racing writers (in any process) wins.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Put creates or overwrites key (used only for hints).
	Put(ctx context.Context, key string, data []byte) error
	// Get reads length bytes of key from off; length < 0 reads to the end.
	// A range past the end returns the bytes that exist (possibly none).
	// stream.ErrNotFound if key is absent.
	Get(ctx context.Context, key string, off, length int64) ([]byte, error)
	// Stat returns the size of key; stream.ErrNotFound if absent.
	Stat(ctx context.Context, key string) (size int64, err error)
	// Delete removes keys; absent keys are not an error.
	Delete(ctx context.Context, keys []string) error
	// List returns the keys under prefix (recursively), sorted bytewise,
	// that are greater than after, at most limit of them (limit <= 0: all).
	// prefix is "" or ends with '/'. Used for recovery and GC only, never on
	// the append or fetch path.
	List(ctx context.Context, prefix, after string, limit int) ([]string, error)
	// Close releases the backend's resources.
	Close() error
}

// RequestStats counts the backend requests a Storage made (the type is
// stream.RequestStats, which a Store reports through stream.StatsReporter).
type RequestStats = stream.RequestStats

// StatsReporter is implemented by Storages that count their requests.
type StatsReporter interface {
	RequestStats() RequestStats
}
