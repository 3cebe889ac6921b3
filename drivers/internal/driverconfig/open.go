package driverconfig

import (
	"context"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Opener is the Open of a driver that runs the chunked engine on a Storage
// S opened from a config C.
type Opener[C any, S chunked.Storage] struct {
	// Parse reads and validates a config document (the driver's
	// ParseConfig).
	Parse func(config []byte) (C, error)
	// Storage opens the Storage of a parsed config (the driver's
	// OpenStorage).
	Storage func(ctx context.Context, c C) (S, error)
	// Options are the engine's options for an open Storage (from the
	// config it holds, defaults applied).
	Options func(st S) chunked.Options
}

// OpenStorage parses config and opens the Storage alone, without the
// engine (for storagetest, tools and benchmarks).
func (o Opener[C, S]) OpenStorage(ctx context.Context, config []byte) (S, error) {
	c, err := o.Parse(config)
	if err != nil {
		var zero S
		return zero, err
	}
	return o.Storage(ctx, c)
}

// Open is a stream.Opener: it parses config, opens the Storage and returns
// the chunked engine on it. Closing the Store closes the Storage.
func (o Opener[C, S]) Open(ctx context.Context, config []byte) (*stream.Store, error) {
	st, err := o.OpenStorage(ctx, config)
	if err != nil {
		return nil, err
	}
	return NewStore(st, o.Options(st))
}

// NewStore is chunked.NewStore that closes st when the engine refuses it,
// so a failed Open leaves no connection behind.
func NewStore(st chunked.Storage, opts chunked.Options) (*stream.Store, error) {
	store, err := chunked.NewStore(st, opts)
	if err != nil {
		st.Close()
		return nil, err
	}
	return store, nil
}
