package s3

import (
	"context"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// DriverName is the name the driver reports in stream.Info.
const DriverName = "s3"

// Version is the driver's version, reported in stream.Info.
const Version = "0.1.0"

// Open is the driver's stream.Opener: it parses config (ParseConfig),
// opens and probes the bucket (NewStorage) and returns the chunked engine
// on it. Closing the Store closes the Storage.
func Open(ctx context.Context, config []byte) (stream.Store, error) {
	cfg, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	st, err := NewStorage(ctx, cfg)
	if err != nil {
		return nil, err
	}
	store, err := chunked.NewStore(st, engineOptions(st.cfg))
	if err != nil {
		st.Close()
		return nil, err
	}
	return store, nil
}

// OpenStorage parses config and returns the Storage alone, without the
// engine: for storage-level tests and tools.
func OpenStorage(ctx context.Context, config []byte) (*Storage, error) {
	cfg, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	return NewStorage(ctx, cfg)
}

// engineOptions maps the driver's config (defaults applied) to the
// engine's options. The engine bounds each Storage call by the same
// operation timeout the driver's retries run within.
func engineOptions(cfg Config) chunked.Options {
	return chunked.Options{
		Driver:            DriverName,
		Version:           Version,
		Linger:            cfg.Engine.Linger,
		MaxChunkBytes:     cfg.Engine.MaxChunkBytes,
		MaxInflightChunks: cfg.Engine.MaxInflightChunks,
		CacheBytes:        cfg.Engine.CacheBytes,
		OpTimeout:         cfg.Timeouts.Operation,
	}
}
