package s3

import (
	"context"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// DriverName is the name the driver reports in stream.Info.
const DriverName = "s3"

// Version is the driver's version, reported in stream.Info.
const Version = "0.1.0"

// opener is the Open sequence: ParseConfig, NewStorage, the chunked
// engine.
var opener = driverconfig.Opener[Config, *Storage]{
	Parse:      ParseConfig,
	NewStorage: NewStorage,
	Options:    func(st *Storage) chunked.Options { return engineOptions(st.cfg) },
}

// Open is the driver's stream.Opener: it parses config (ParseConfig),
// opens and probes the bucket (NewStorage) and returns the chunked engine
// on it. Closing the Store closes the Storage.
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	return opener.Open(ctx, config)
}

// OpenStorage parses config and returns the Storage alone, without the
// engine: for storage-level tests and tools.
func OpenStorage(ctx context.Context, config []byte) (*Storage, error) {
	return opener.OpenStorage(ctx, config)
}

// engineOptions maps the driver's config (defaults applied) to the
// engine's options. The engine bounds each Storage call by the same
// operation timeout the driver's retries run within.
func engineOptions(cfg Config) chunked.Options {
	o := cfg.Engine.Options(DriverName, Version, cfg.Timeouts.Operation)
	// A PutObject that returned is stored by the service, and every client
	// of the bucket sees it.
	o.Durable, o.SharedNamespace = true, true
	return o
}
