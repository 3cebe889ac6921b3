package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/wal"
)

// streamSetsConfig is the `stream_sets` section of the serve config (top
// level: the embedded default and every driver without a section of its
// own; per driver: that driver). Stream sets are on unless enabled is
// false: the partitions and the broker's own streams on that driver are
// virtual streams sharing one write-ahead stream per broker session
// (stream/wal), so backend writes grow with bytes, not partitions.
type streamSetsConfig struct {
	// Enabled turns stream sets on (default) or off for a driver.
	Enabled *bool `yaml:"enabled"`
	// Linger is the least interval between WAL batches of all partitions (default
	// 5ms on nfs, hdfs and memory; 50ms on s3, azure and plugin drivers,
	// where a put may be billed).
	Linger time.Duration `yaml:"linger"`
	// FlushWhenIdle cuts a batch at once when no WAL append is in flight,
	// batching only while one is (default true on nfs, hdfs and memory).
	FlushWhenIdle *bool `yaml:"flush_when_idle"`
	// MaxFlushBytes cuts a WAL batch at this size (default 4 MiB).
	MaxFlushBytes int `yaml:"max_flush_bytes"`
	// CompactBytes starts compaction when this much acked data is not yet
	// in per-partition data streams (default 128 MiB).
	CompactBytes int64 `yaml:"compact_bytes"`
	// CompactInterval starts compaction when the oldest such data is this
	// old (default 5m).
	CompactInterval time.Duration `yaml:"compact_interval"`
	// CompactParallelism bounds the puts a compaction pass has in flight
	// (default 1 on nfs, whose passes share a disk with the WAL's fsyncs;
	// 4 elsewhere).
	CompactParallelism int `yaml:"compact_parallelism"`
	// CompactYield defers a compaction copy while the WAL is busy, up to
	// this long after it turned busy (default 20ms on nfs, hdfs and memory
	// when the broker has one CPU, where copies take turns on it with the
	// requests; off otherwise; negative: off).
	CompactYield time.Duration `yaml:"compact_yield"`
	// WALFiles keeps the WALs of the embedded default in a LogStore in
	// <data>/wal, appended in place with one fdatasync per batch, instead
	// of a put per batch (default true; the embedded default only).
	WALFiles *bool `yaml:"wal_files"`
}

// merged returns c with unset fields taken from def.
func (c *streamSetsConfig) merged(def *streamSetsConfig) streamSetsConfig {
	var out streamSetsConfig
	if def != nil {
		out = *def
	}
	if c == nil {
		return out
	}
	if c.Enabled != nil {
		out.Enabled = c.Enabled
	}
	if c.Linger != 0 {
		out.Linger = c.Linger
	}
	if c.FlushWhenIdle != nil {
		out.FlushWhenIdle = c.FlushWhenIdle
	}
	if c.MaxFlushBytes != 0 {
		out.MaxFlushBytes = c.MaxFlushBytes
	}
	if c.CompactBytes != 0 {
		out.CompactBytes = c.CompactBytes
	}
	if c.CompactInterval != 0 {
		out.CompactInterval = c.CompactInterval
	}
	if c.CompactParallelism != 0 {
		out.CompactParallelism = c.CompactParallelism
	}
	if c.CompactYield != 0 {
		out.CompactYield = c.CompactYield
	}
	if c.WALFiles != nil {
		out.WALFiles = c.WALFiles
	}
	return out
}

// withStreamSets wraps a driver's store in stream sets unless they are off.
// kind is the built-in driver (empty for a plugin binary): it picks the
// defaults (streamSetsOptions). walDir, if not empty, is where a LogStore
// keeps the WALs (the embedded default's), unless c turns wal_files off;
// then the WALs go to st, and those left in walDir are still read.
func withStreamSets(name, kind string, st *stream.Store, c streamSetsConfig, walDir string, logger *slog.Logger) (*stream.Store, error) {
	if c.Enabled != nil && !*c.Enabled {
		logger.Info("stream sets off", "driver", name)
		return st, nil
	}
	if c.WALFiles != nil && *c.WALFiles && walDir == "" {
		return nil, fmt.Errorf("stream_sets: wal_files is for the embedded default (no drivers configured); driver %s keeps its WALs in its own store", name)
	}
	// The CPUs the broker may use, not GOMAXPROCS: serve sets that to
	// twice them (setBrokerProcs) before it opens the stores.
	opts := streamSetsOptions(kind, c, defaultProcs)
	opts.Logger = logger.With("driver", name)
	files := walFiles(walDir, c.WALFiles, logger)
	if _, err := os.Stat(walDir); files || (walDir != "" && err == nil) {
		// WAL files on, or off with WALs of an earlier session perhaps
		// still there: those are found where they were made.
		ls, err := nfs.OpenLogStore(walDir, nfs.LogOptions{Logger: logger.With("wal_dir", walDir)})
		if err != nil {
			return nil, fmt.Errorf("stream_sets: WAL files in %s: %w", walDir, err)
		}
		if files {
			opts.WALStore = ls
		} else {
			opts.FormerWALStores = []*stream.Store{ls}
		}
	}
	ws, err := wal.NewStore(st, opts)
	if err != nil {
		for _, s := range append([]*stream.Store{opts.WALStore}, opts.FormerWALStores...) {
			if s != nil {
				s.Close()
			}
		}
		return nil, fmt.Errorf("stream_sets: %w", err)
	}
	o := ws.Options()
	logger.Info("stream sets on", "driver", name, "linger", o.Linger, "flush_when_idle", o.FlushWhenIdle, "compact_parallelism", o.CompactParallelism, "compact_yield", o.CompactYield, "wal_files", opts.WALStore != nil)
	return stream.NewStore(ws), nil
}

// walFiles says whether the WALs go into a LogStore in walDir: on by
// default where walDir is on a local file system. A LogStore fences with
// names that every process must see at once; a network (or FUSE) file
// system's client may cache a lookup that found nothing, so there the
// default is off and wal_files: true is taken with a warning.
func walFiles(walDir string, set *bool, logger *slog.Logger) bool {
	if walDir == "" || (set != nil && !*set) {
		return false
	}
	shared := nfs.SharedFileSystem(filepath.Dir(walDir))
	switch {
	case shared == "":
		return true
	case set == nil:
		logger.Info("stream sets: WALs kept in the nfs store, not in files appended in place: --data is on a shared file system (set stream_sets.wal_files: true only where a name one process makes is seen at once by all, e.g. NFS mounted with lookupcache=none)", "fs", shared)
		return false
	default:
		logger.Warn("stream sets: wal_files on a shared file system: its fence needs a name one process makes seen at once by all (NFS: mount with lookupcache=none)", "fs", shared)
		return true
	}
}

// streamSetsOptions are the stream-set options of a driver of kind (""
// for a plugin binary) under config c, for a broker on cpus CPUs
// (defaultProcs): what c sets, else the driver's defaults
// (docs/streamsets.md, "Defaults"), else wal's.
func streamSetsOptions(kind string, c streamSetsConfig, cpus int) wal.Options {
	opts := wal.Options{
		Linger: c.Linger, MaxFlushBytes: c.MaxFlushBytes,
		CompactBytes: c.CompactBytes, CompactInterval: c.CompactInterval,
		CompactParallelism: c.CompactParallelism,
	}
	billed := !fileStores[kind]
	if opts.Linger == 0 && billed {
		opts.Linger = objectStoreLinger
	}
	opts.FlushWhenIdle = !billed
	if c.FlushWhenIdle != nil {
		opts.FlushWhenIdle = *c.FlushWhenIdle
	}
	if opts.CompactParallelism == 0 && kind == "nfs" {
		opts.CompactParallelism = diskCompactParallelism
	}
	opts.CompactYield = c.CompactYield
	if opts.CompactYield == 0 && !billed && cpus == 1 {
		opts.CompactYield = oneCPUCompactYield
	}
	return opts
}

// oneCPUCompactYield is the default CompactYield on fileStores when the
// broker may use one CPU (its affinity, its cgroup limit or
// GOMAXPROCS=1), where a copy's encoding and the requests take turns on
// it: a Produce request of megabytes keeps the WAL busy for about 10 ms,
// so copies wait out most requests and go in the gaps between them. With more CPUs copies run beside the requests
// and waiting only makes compaction late (docs/streamsets.md,
// "Defaults").
const oneCPUCompactYield = 20 * time.Millisecond

// diskCompactParallelism is nfs's default CompactParallelism: a pass's
// puts add at most one to the disk queue a WAL put's fsync waits in
// (docs/streamsets.md, "Defaults").
const diskCompactParallelism = 1

// fileStores are the built-in drivers on file systems, where a put costs
// time, not money: their stream sets flush a batch as soon as the WAL is
// idle. Every other driver (s3 and azure bill every request; a plugin may)
// lingers objectStoreLinger by default (docs/streamsets.md, "Defaults").
var fileStores = map[string]bool{"nfs": true, "hdfs": true, "memory": true}

// objectStoreLinger is the default linger off fileStores: about 20 WAL
// puts a second at most, whatever the load.
const objectStoreLinger = 50 * time.Millisecond

// builtinKind is d's built-in driver, or "" for a plugin binary.
func builtinKind(d driverSpec) string {
	if d.Binary == "builtin" || d.Binary == "" {
		return d.Driver
	}
	return ""
}
