// Package hdfs is the Strata driver for HDFS: a chunked.Storage on the pure
// Go client github.com/colinmarc/hdfs/v2, run by the chunked engine, which
// gives it the whole stream contract.
//
// That client has no hflush/hsync and no lease recovery, and its Rename
// overwrites files. The driver therefore never depends on an unclosed file:
// an object is written and closed (durable once the NameNode completes it)
// in a temp directory, then published by renaming that directory to the
// key, which HDFS refuses atomically when the key's directory already
// holds an object (put-if-absent). A writer that dies mid-put leaves its
// file in the temp area, never at a key, and the temp area is swept.
// Errors map to the contract: FileNotFoundException is stream.ErrNotFound,
// an occupied key is stream.ErrAlreadyExists, and connection failures,
// timeouts, safe mode, permission errors and every other remote exception
// are stream.ErrUnavailable with the cause named.
//
// It is not a general HDFS client: it writes only the layout the engine
// asks for, under Config.Root. See docs/drivers/hdfs.md.
package hdfs

import (
	"context"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// DriverName is the name the driver reports in stream.Info.
const DriverName = "hdfs"

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
// hdfs:// URL; see ParseConfig), connects and checks the root (OpenStorage)
// and returns the chunked engine on that Storage. Closing the Store closes
// the Storage.
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	return opener.Open(ctx, config)
}

// engineOptions maps a defaulted config to the engine's options; the
// engine bounds each Storage call by timeouts.operation.
func engineOptions(cfg Config) chunked.Options {
	o := cfg.Engine.Options(DriverName, Version, cfg.Timeouts.Operation)
	// A put is published only once its file's Close succeeded (HDFS has
	// it replicated), and every client of the NameNode sees it.
	o.Durable, o.SharedNamespace = true, true
	return o
}
