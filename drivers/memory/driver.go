// Package memory is Strata's reference driver: the complete Stream contract
// held in memory. It validates the conformance suite itself and is the
// template for new drivers (see docs/writing-a-driver.md).
//
// It is not durable: data lives as long as the process. Stores opened with
// the same Config.Namespace in one process share their streams, which is how
// tests get a "second, independent store" and simulate a crash (drop a store
// without Close and open a new one on the namespace).
package memory

import (
	"context"

	"github.com/stratastream/strata/stream"
)

// DriverName is the name the driver reports in stream.Info.
const DriverName = "memory"

// Version is the driver's version string.
const Version = "0.1.0"

// Open is the driver's stream.Opener: it parses config (ParseConfig) and
// returns the Store (OpenStorage behind the front door).
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	c, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	d, err := OpenStorage(ctx, c)
	if err != nil {
		return nil, err
	}
	return stream.NewStore(d), nil
}

// OpenStorage returns the driver for c. The memory driver does not run on
// the chunked engine, so where the other drivers' OpenStorage returns their
// chunked.Storage this returns the stream.DriverStore itself; wrap it with
// stream.NewStore (as Open and New do), or layer it under another driver.
func OpenStorage(_ context.Context, c Config) (*Store, error) { return newStore(c), nil }

// New returns the stream.Store of a memory driver for c.
func New(c Config) *stream.Store { return stream.NewStore(newStore(c)) }
