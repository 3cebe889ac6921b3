package sharedlog

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stratastream/strata/stream"
)

// Options configure a Log. The zero value of every field but Epoch means its
// default.
type Options struct {
	// Epoch is the partition leader epoch of this owner. It is also the
	// epoch of the read-write opens of the partition's streams, so opening
	// with a higher epoch fences every older owner; reopening with the same
	// epoch is how an owner recovers (it supersedes its old session).
	// Must be >= 0 and >= the latest epoch of the partition.
	Epoch int32

	// LogAppendTime stamps every appended batch with the append time
	// (Kafka's message.timestamp.type=LogAppendTime) instead of keeping the
	// producer's CreateTime.
	LogAppendTime bool

	// TrustCompressedRecords skips decompressing compressed batches on
	// append to check their records (count, framing, offset deltas); the
	// header is still checked. Kafka always checks; this trades that for
	// CPU.
	TrustCompressedRecords bool

	// MaxBatchBytes is the largest record batch accepted (Kafka's
	// max.message.bytes); larger ones are MESSAGE_TOO_LARGE. Default and
	// upper bound: the store's Info().MaxBatchBytes.
	MaxBatchBytes int

	// RetentionTime deletes batches whose max timestamp is older than
	// now - RetentionTime (retention.ms). Zero or negative: no time
	// retention.
	RetentionTime time.Duration
	// RetentionBytes deletes the oldest batches while the partition holds
	// more than RetentionBytes after the deletion (retention.bytes; what is
	// kept may exceed it by up to one IndexIntervalBytes). Zero or
	// negative: no size retention.
	RetentionBytes int64
	// RetentionCheckInterval is how often the background work applies
	// retention. Default 5 minutes.
	RetentionCheckInterval time.Duration

	// CheckpointBytes: a checkpoint of the producer state, epochs and index
	// is written once this many bytes were appended since the last one, so
	// a new owner replays at most about this much. Default 16 MiB.
	CheckpointBytes int64
	// CheckpointInterval: a checkpoint is also written this often when
	// anything changed. Default 1 minute.
	CheckpointInterval time.Duration

	// IndexIntervalBytes is the spacing of the sparse offset index used by
	// timestamp lookups and size retention. Default 1 MiB.
	IndexIntervalBytes int

	// ProducerExpiry drops the state of a producer id idle this long
	// (producer.id.expiration.ms). Default 24 hours.
	ProducerExpiry time.Duration

	// MaxInflight bounds the appends in flight at once; further appends
	// wait for a slot. Default 1024.
	MaxInflight int

	// Now returns the current time (default time.Now); tests set it.
	Now func() time.Time
	// Logger receives background events (default slog.Default()).
	Logger *slog.Logger
}

// withDefaults validates o and fills in defaults; info is the store's.
func (o Options) withDefaults(info stream.Info) (Options, error) {
	if o.Epoch < 0 {
		return o, fmt.Errorf("%w: sharedlog: Options.Epoch must be >= 0, got %d", stream.ErrInvalidArgument, o.Epoch)
	}
	if o.MaxBatchBytes < 0 || o.IndexIntervalBytes < 0 || o.MaxInflight < 0 || o.CheckpointBytes < 0 {
		return o, fmt.Errorf("%w: sharedlog: Options.MaxBatchBytes, IndexIntervalBytes, MaxInflight and CheckpointBytes must be >= 0", stream.ErrInvalidArgument)
	}
	if o.RetentionCheckInterval < 0 || o.CheckpointInterval < 0 || o.ProducerExpiry < 0 {
		return o, fmt.Errorf("%w: sharedlog: Options.RetentionCheckInterval, CheckpointInterval and ProducerExpiry must be >= 0", stream.ErrInvalidArgument)
	}
	limit := info.MaxBatchBytes
	if limit <= 0 {
		limit = stream.DefaultMaxBatchBytes
	}
	if o.MaxBatchBytes == 0 || o.MaxBatchBytes > limit {
		o.MaxBatchBytes = limit
	}
	if o.RetentionCheckInterval == 0 {
		o.RetentionCheckInterval = 5 * time.Minute
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = 16 << 20
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = 1 << 20
	}
	if o.ProducerExpiry == 0 {
		o.ProducerExpiry = 24 * time.Hour
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = 1024
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}
