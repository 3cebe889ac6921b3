// Package azure is the Strata driver for Azure Blob Storage (and Azurite):
// a chunked.Storage on one container, run by the chunked engine, which
// gives it the whole stream contract.
//
// Chunks, manifests and generation records are block blobs written with
// If-None-Match: * (put-if-absent: exactly one racing writer wins, and the
// blob is durable when the upload answers 201); reads are ranged
// downloads; listing is used only for recovery and garbage collection.
// Errors map to the contract: BlobNotFound is stream.ErrNotFound,
// BlobAlreadyExists / ConditionNotMet (409, 412) on a conditional upload is
// stream.ErrAlreadyExists, and transport errors, timeouts, throttling and
// 5xx are stream.ErrUnavailable.
//
// It is not a general blob client: it writes only the layout the engine
// asks for, under Config.Prefix. See docs/drivers/azure.md.
package azure

import (
	"context"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// DriverName is the name the driver reports in stream.Info.
const DriverName = "azure"

// Version is the driver's version, reported in stream.Info.
const Version = "0.1.0"

// opener is the Open sequence: ParseConfig, OpenStorage, the chunked
// engine.
var opener = driverconfig.Opener[Config, *Storage]{
	Parse:   ParseConfig,
	Storage: OpenStorage,
	Options: func(st *Storage) chunked.Options { return engineOptions(st.cfg) },
}

// Open is the driver's stream.Opener: it parses config (YAML, JSON or an
// azblob:// URL; see ParseConfig), checks the container and credentials
// (OpenStorage) and returns the chunked engine on that Storage.
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	return opener.Open(ctx, config)
}

// engineOptions maps a defaulted config to the engine's options.
func engineOptions(cfg Config) chunked.Options {
	o := cfg.Engine.Options(DriverName, Version, cfg.Timeouts.Operation)
	// A Put Blob that returned is stored by the service, and every client
	// of the container sees it.
	o.Durable, o.SharedNamespace = true, true
	return o
}
