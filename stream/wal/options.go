package wal

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stratastream/strata/stream"
)

// Options configure a Store of virtual streams. The zero value of every
// field means the default named beside it.
type Options struct {
	// Linger is the interval between WAL batches: an append waits for
	// appends of other virtual streams to share its batch until Linger
	// after the last batch was cut, and goes out at once when that was
	// Linger ago or more (default DefaultLinger; negative: no wait, a
	// batch is cut as soon as a flush slot is free). At most one batch
	// per Linger is cut, except when the queue reaches MaxFlushBytes.
	Linger time.Duration
	// FlushWhenIdle cuts a WAL batch at once when no WAL append is in
	// flight (group commit): an append waits for one base append when the
	// WAL is idle, and appends queued while one is in flight share the
	// next, cut when it completes or after Linger. The idle cut is made by
	// a flusher goroutine, so appends a caller makes back to back (the
	// partitions of one Produce request) go out together. Latency of one base
	// append at light load, at the cost of more base appends (up to one per
	// base append time); off, every batch waits out Linger. With it, a
	// stream's Flush (stream.Flusher: a broker has started all of a
	// request's appends) cuts the queue at once too, up to
	// MaxInflightFlushes batches in flight; without it Flush does nothing.
	FlushWhenIdle bool
	// MaxFlushBytes cuts a WAL batch once the queued appends reach it
	// (default DefaultMaxFlushBytes, at most the base's MaxBatchBytes).
	MaxFlushBytes int
	// MaxInflightFlushes bounds the WAL appends in flight at once (default
	// DefaultMaxInflightFlushes).
	MaxInflightFlushes int
	// CompactBytes starts a compaction pass when the acknowledged batches
	// not yet copied to their streams' data streams reach it, across all
	// streams (default DefaultCompactBytes). It also bounds the memory the
	// tails take: a writer serves its own tails from memory.
	CompactBytes int64
	// CompactInterval starts a compaction pass when the oldest
	// uncompacted batch is this old (default DefaultCompactInterval).
	CompactInterval time.Duration
	// CompactParallelism bounds the V.data appends (puts of copied
	// tails) a compaction pass has in flight at once, over all the
	// streams it copies, and the streams it copies at once (default
	// DefaultCompactParallelism). A pass's puts compete with the WAL's for
	// the backend: on one disk each put in flight lengthens the queue a
	// WAL put's fsync waits in, so fewer make the appends' tail latency
	// lower, at the cost of a longer pass. A pass that finds twice
	// CompactBytes not yet copied (compaction falling behind) takes twice
	// as many, doubling for each CompactBytes more, up to
	// BehindCompactParallelism.
	CompactParallelism int
	// CompactYield lets a compaction pass defer a copy while the WAL is
	// busy (appends queued or in flight), for at most CompactYield after
	// it last turned busy: copies then take the CPU and the disk in the
	// gaps between bursts of appends (a producer's requests one after
	// another) rather than from them. Under continuous load (busy for
	// longer) copies go at once, and so do those of a pass that finds
	// compaction behind (twice CompactBytes not yet copied), of a close
	// and of a takeover. Zero or negative: copies never wait (the
	// default). strata serve sets it on the file-system drivers when the
	// broker has one CPU (docs/streamsets.md, "Defaults").
	CompactYield time.Duration
	// SweepInterval is how often the store looks for the WALs of dead
	// sessions that no stream points into any more, and deletes them
	// (default DefaultSweepInterval; negative: never).
	SweepInterval time.Duration
	// Prefix is the base-name prefix of WAL streams (default "_wal").
	Prefix string
	// WALStore, if set, holds the WAL streams instead of the base store
	// (the virtual streams' meta and data streams stay in the base). It
	// must share the base's durability and reach: every session that can
	// open the base's streams must reach the same WALStore. The Store owns
	// it (its Close closes it). The embedded default puts its WALs in an
	// nfs.LogStore beside the nfs driver's directory: appended in place
	// with one fdatasync, not a put per WAL batch (docs/streamsets.md,
	// "WAL store").
	WALStore *stream.Store
	// FormerWALStores are other stores where sessions of an earlier
	// configuration may have left WALs: a WAL stays in the store its
	// session made it in, so they are looked in (found, fenced, read and
	// swept) after the WAL store and before the base. strata serve names
	// the embedded default's LogStore here when wal_files is turned off.
	// The Store owns them (its Close closes them).
	FormerWALStores []*stream.Store
	// Logger receives the layer's structured logs (default: discard).
	Logger *slog.Logger
	// NewID returns 16 random bytes (default crypto/rand). Tests set it.
	NewID func() [16]byte

	// broken switches rules off, for the simulation test's proof that it
	// catches their absence. The zero value is the protocol.
	broken brokenRules
}

// brokenRules name the rules a test may switch off.
type brokenRules struct {
	noClaim      bool // W2 off: a stream appends to the WAL with no record naming it
	noCloseCopy  bool // W5 off: close writes its record naming no WAL without copying the tail
	noFenceWAL   bool // W3a off: a takeover reads the named WAL without fencing it
	noDataFence  bool // W3a/W8 off: V.data's NextOffset is read without a fencing reopen
	noCopy       bool // W3b off: a takeover keeps the inherited tail in the old WAL
	noPrefixStop bool // W4 off: a gap or overlap is ErrCorrupt instead of the end
	noPoison     bool // W7 off: a failed WAL append does not end the WAL
	gcHeldOnly   bool // W6a off: GC counts only the claims of streams still held
	noGCSnap     bool // W6b off: GC's bound is taken at trim time
}

// Defaults of Options.
const (
	DefaultLinger             = 5 * time.Millisecond
	DefaultMaxFlushBytes      = 4 << 20
	DefaultMaxInflightFlushes = 4
	DefaultCompactBytes       = 128 << 20
	DefaultCompactInterval    = 5 * time.Minute
	DefaultCompactParallelism = 4
	BehindCompactParallelism  = 16
	DefaultSweepInterval      = 10 * time.Minute
	DefaultPrefix             = "_wal"
)

func (o Options) withDefaults(baseMaxBatch int) (Options, error) {
	switch {
	case o.Linger == 0:
		o.Linger = DefaultLinger
	case o.Linger < 0:
		o.Linger = 0
	}
	if o.MaxFlushBytes == 0 {
		o.MaxFlushBytes = DefaultMaxFlushBytes
	}
	if baseMaxBatch > 0 && o.MaxFlushBytes > baseMaxBatch {
		o.MaxFlushBytes = baseMaxBatch
	}
	if o.MaxInflightFlushes == 0 {
		o.MaxInflightFlushes = DefaultMaxInflightFlushes
	}
	if o.CompactBytes == 0 {
		o.CompactBytes = DefaultCompactBytes
	}
	if o.CompactInterval == 0 {
		o.CompactInterval = DefaultCompactInterval
	}
	if o.CompactParallelism == 0 {
		o.CompactParallelism = DefaultCompactParallelism
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.MaxFlushBytes < 0:
		return o, fmt.Errorf("wal: MaxFlushBytes %d is negative", o.MaxFlushBytes)
	case o.MaxInflightFlushes < 0:
		return o, fmt.Errorf("wal: MaxInflightFlushes %d is negative", o.MaxInflightFlushes)
	case o.CompactBytes < 0:
		return o, fmt.Errorf("wal: CompactBytes %d is negative", o.CompactBytes)
	case o.CompactInterval < 0:
		return o, fmt.Errorf("wal: CompactInterval %v is negative", o.CompactInterval)
	case o.CompactParallelism < 0:
		return o, fmt.Errorf("wal: CompactParallelism %d is negative", o.CompactParallelism)
	}
	return o, nil
}
