package chunked

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stratastream/strata/stream"
)

// Options configure the engine. The zero value of every field means a
// sensible default (see the constants below).
type Options struct {
	// Driver and Version are reported in Info.
	Driver, Version string
	// MaxBatchBytes is the largest Batch.Size accepted
	// (default stream.DefaultMaxBatchBytes).
	MaxBatchBytes int
	// MaxProperties is the most properties a batch may carry
	// (default stream.DefaultMaxProperties; negative: none allowed).
	MaxProperties int
	// MaxFetchBytes is Info.MaxFetchBytes (default stream.DefaultMaxFetchBytes).
	MaxFetchBytes int
	// Linger is how long an append waits for others to share its chunk
	// (group commit). 0 means no waiting: a chunk is cut as soon as a put
	// slot is free, taking whatever has queued meanwhile.
	Linger time.Duration
	// MaxChunkBytes is the byte threshold of group commit: a chunk is cut
	// when the queued batches reach it (default DefaultMaxChunkBytes). A
	// single batch larger than it becomes a chunk of its own.
	MaxChunkBytes int
	// MaxInflightChunks is how many chunk puts of one stream may be in
	// flight at once (default DefaultMaxInflightChunks).
	MaxInflightChunks int
	// CacheBytes bounds the Store's cache of recent chunks
	// (default DefaultCacheBytes; negative: no cache).
	CacheBytes int64
	// CheckpointChunks: after this many acked chunks without a manifest,
	// the writer writes a checkpoint manifest (a trim that keeps the start)
	// so that later opens and readers walk few slots, and GC removes the
	// fence chunks and zombies behind it (default DefaultCheckpointChunks;
	// negative: never).
	CheckpointChunks int
	// IndexPageEntries: a manifest names the chunks of a stream's chain
	// by index pages of this many entries (40 bytes each), written once,
	// plus the entries after the last page, so that a manifest of a
	// stream with millions of chunks stays small (default
	// DefaultIndexPageEntries; negative: no pages, every manifest lists
	// every chunk).
	IndexPageEntries int
	// OpTimeout bounds every single Storage call (default DefaultOpTimeout).
	// A put that times out has an unknown outcome and is handled as such;
	// the append it carries fails with ErrUnavailable.
	OpTimeout time.Duration
	// Durable declares that a put the Storage returned from survives the
	// loss of the process and of the host (Info.Durable). The engine acks
	// only what the Storage has made durable, so the Store is durable iff
	// the Storage is. The zero value claims nothing.
	Durable bool
	// SharedNamespace declares that Storages opened on the same config in
	// other processes see the same objects, so Stores on them share
	// streams (Info.SharedNamespace). The zero value claims nothing.
	SharedNamespace bool
	// Logger receives the engine's structured logs (default: discard).
	Logger *slog.Logger
	// NewID returns unique ids for incarnations and put ids (default:
	// random UUIDs). Tests set it for determinism.
	NewID func() string

	// broken switches protocol rules off, for the simulation test's proof
	// that it catches their absence. The zero value is the protocol.
	broken brokenRules
}

// brokenRules name the protocol rules a test may switch off.
type brokenRules struct {
	ownBySession  bool // R1 off: a taken slot is ours if it carries our session
	gcByOffset    bool // R2 off: GC deletes any chunk whose offsets lie below the start
	noAckProbe    bool // R3 off: ack on confirmation, without probing the next manifest
	noWalkProbe   bool // R4 off: walks end at the first absent slot; no probe after the fence
	replaceValid  bool // R6 off: re-place unacked chunks after valid ones a re-walk found
	seedWithOwner bool // R7 off: seed walks with the manifest owner's session
}

// maxPageEntries bounds Options.IndexPageEntries (a page of 40 MiB).
const maxPageEntries = 1 << 20

// EngineVersion is the engine's version, the default Options.Version.
const EngineVersion = "chunked/1"

// Defaults of Options.
const (
	DefaultMaxChunkBytes     = 4 << 20
	DefaultMaxInflightChunks = 4
	DefaultCacheBytes        = 32 << 20
	DefaultOpTimeout         = 10 * time.Second
	DefaultCheckpointChunks  = 1024
	DefaultIndexPageEntries  = 1024
)

func (o Options) withDefaults() (Options, error) {
	if o.Driver == "" {
		o.Driver = "chunked"
	}
	if o.Version == "" {
		o.Version = EngineVersion
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = stream.DefaultMaxBatchBytes
	}
	switch {
	case o.MaxProperties == 0:
		o.MaxProperties = stream.DefaultMaxProperties
	case o.MaxProperties < 0:
		o.MaxProperties = 0
	}
	if o.MaxFetchBytes == 0 {
		o.MaxFetchBytes = stream.DefaultMaxFetchBytes
	}
	if o.MaxChunkBytes == 0 {
		o.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if o.MaxInflightChunks == 0 {
		o.MaxInflightChunks = DefaultMaxInflightChunks
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.CheckpointChunks == 0 {
		o.CheckpointChunks = DefaultCheckpointChunks
	}
	if o.IndexPageEntries == 0 {
		o.IndexPageEntries = DefaultIndexPageEntries
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.NewID == nil {
		o.NewID = randomID
	}
	switch {
	case o.MaxBatchBytes < 0:
		return o, fmt.Errorf("%w: chunked.Options.MaxBatchBytes %d < 0", stream.ErrInvalidArgument, o.MaxBatchBytes)
	case o.MaxFetchBytes < 0:
		return o, fmt.Errorf("%w: chunked.Options.MaxFetchBytes %d < 0", stream.ErrInvalidArgument, o.MaxFetchBytes)
	case o.Linger < 0:
		return o, fmt.Errorf("%w: chunked.Options.Linger %v < 0", stream.ErrInvalidArgument, o.Linger)
	case o.MaxChunkBytes < 0:
		return o, fmt.Errorf("%w: chunked.Options.MaxChunkBytes %d < 0", stream.ErrInvalidArgument, o.MaxChunkBytes)
	case o.MaxInflightChunks < 0:
		return o, fmt.Errorf("%w: chunked.Options.MaxInflightChunks %d < 0", stream.ErrInvalidArgument, o.MaxInflightChunks)
	case o.IndexPageEntries > maxPageEntries:
		return o, fmt.Errorf("%w: chunked.Options.IndexPageEntries %d > %d", stream.ErrInvalidArgument, o.IndexPageEntries, maxPageEntries)
	case o.OpTimeout < 0:
		return o, fmt.Errorf("%w: chunked.Options.OpTimeout %v < 0", stream.ErrInvalidArgument, o.OpTimeout)
	}
	return o, nil
}
