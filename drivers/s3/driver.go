// Package s3 is the Strata driver for AWS S3 and S3-compatible object
// stores (MinIO, Ceph RGW, ...), built on aws-sdk-go-v2.
//
// The driver is small: Storage implements chunked.Storage (put-if-absent
// with If-None-Match: *, ranged GETs, HEAD, batched deletes, listing for
// recovery and GC only) and the chunked engine supplies the whole Stream
// contract on top of it. Open parses a Config (YAML, JSON or an s3:// URL),
// probes the bucket so bad settings fail at once, and returns the engine's
// stream.Store. Every request is counted (Storage.RequestStats), so cost
// per GiB can be computed.
//
// It is not a general S3 client: it reads and writes only objects under
// its own prefix, in the layout the engine defines (docs/drivers/s3.md).
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

// opener is the Open sequence: ParseConfig, OpenStorage, the chunked
// engine.
var opener = driverconfig.Opener[Config, *Storage]{
	Parse:   ParseConfig,
	Storage: OpenStorage,
	Options: func(st *Storage) chunked.Options { return engineOptions(st.cfg) },
}

// Open is the driver's stream.Opener: it parses config (ParseConfig),
// opens and probes the bucket (OpenStorage) and returns the chunked engine
// on it. Closing the Store closes the Storage.
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	return opener.Open(ctx, config)
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
