// Package nfs is the Strata driver for a shared POSIX file system: NFS,
// EFS, NetApp, or a local directory (the embedded default). It is a small
// chunked.Storage (Storage) under the chunked engine, which provides the
// whole Stream contract: Open returns chunked.NewStore on it.
//
// Put-if-absent is a temp file, fsync, link(2) to the final name (EEXIST
// means taken) and an fsync of the directory: atomic and exclusive across
// processes and hosts, with no flock/fcntl locks and no reliance on
// attribute caches. See docs/drivers/nfs.md for the layout, the mount
// options and the failure behaviour.
//
// It is not a file-per-stream log: streams are chunk files written by the
// engine, never appended to in place.
package nfs

import (
	"context"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// Version is the driver's version, reported in Info.
const Version = "0.1.0"

// DriverName is the name the driver reports in stream.Info and its errors.
const DriverName = "nfs"

// Open is the driver's stream.Opener: it parses config (see Config), opens
// the Storage on its root and returns the engine's Store on it.
// Logs go to slog.Default (in a plugin binary, to the host).
func Open(ctx context.Context, config []byte) (*stream.Store, error) {
	c, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	return openConfig(ctx, c)
}

// openConfig is Open with a parsed Config.
func openConfig(ctx context.Context, c Config) (*stream.Store, error) {
	st, err := OpenStorage(ctx, c)
	if err != nil {
		return nil, err
	}
	return driverconfig.NewStore(st, c.engineOptions())
}

// engineOptions are the chunked.Options of a config.
func (c Config) engineOptions() chunked.Options {
	o := c.engine().Options(DriverName, Version, 0)
	o.Durable = c.fsync()    // acks survive the host only with fsync
	o.SharedNamespace = true // every process on the root sees its files
	o.Logger = c.logger()
	return o
}
