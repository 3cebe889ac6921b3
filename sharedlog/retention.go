package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// DeleteRecords moves the log start offset up to offset (DeleteRecords;
// -1 means the high watermark) durably and returns the new log start
// offset (the low watermark). An offset above the high watermark is
// OFFSET_OUT_OF_RANGE; one below the log start changes nothing.
func (l *Log) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	hw := l.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return l.LogStartOffset(), &Error{Code: kerr.OffsetOutOfRange.Code, Partition: l.name, Op: "delete records",
			Msg: fmt.Sprintf("offset %d is outside [0, high watermark %d]", offset, hw)}
	}
	if err := l.trim(ctx, offset); err != nil {
		return l.LogStartOffset(), wrapErr(l.name, "delete records", err)
	}
	return l.LogStartOffset(), nil
}

// trim moves the log start offset to offset (<= the high watermark).
func (l *Log) trim(ctx context.Context, offset int64) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	if offset <= l.LogStartOffset() {
		return nil
	}
	if err := l.data.Trim(ctx, offset); err != nil {
		return fmt.Errorf("trim %q to offset %d: %w", l.data.Name(), offset, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset > l.start {
		l.start = offset
		l.index.trim(offset)
		l.epochs = l.epochs.trimStart(offset)
		l.prod.expire(-1<<63, offset)
		l.dirty = true
	}
	return nil
}

// background applies retention and writes checkpoints until Close, or
// until a newer owner fenced the log: then it logs that once and stops (a
// fenced log can write nothing more).
func (l *Log) background() {
	defer close(l.bgEnd)
	retention := time.NewTicker(l.opts.RetentionCheckInterval)
	defer retention.Stop()
	ckpt := time.NewTicker(l.opts.CheckpointInterval)
	defer ckpt.Stop()
	for {
		var err error
		select {
		case <-l.stop:
			return
		case <-retention.C:
			if err = l.ApplyRetention(l.ctx); err != nil && !errors.Is(err, stream.ErrFenced) {
				l.opts.Logger.Warn("sharedlog: retention failed", "partition", l.name, "err", err)
			}
		case <-ckpt.C:
			err = l.backgroundCheckpoint()
		case <-l.kick:
			err = l.backgroundCheckpoint()
		}
		if errors.Is(err, stream.ErrFenced) {
			l.opts.Logger.Info("sharedlog: a newer owner holds the partition; background checkpoints and retention stop", "partition", l.name, "err", err)
			return
		}
	}
}

func (l *Log) backgroundCheckpoint() error {
	err := l.Checkpoint(l.ctx)
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, stream.ErrFenced):
	default:
		l.opts.Logger.Warn("sharedlog: checkpoint failed", "partition", l.name, "err", err)
	}
	return err
}

// ApplyRetention deletes the oldest batches beyond RetentionTime and
// RetentionBytes now (the background goroutine calls it every
// RetentionCheckInterval). It trims whole batches only and never past the
// high watermark.
func (l *Log) ApplyRetention(ctx context.Context) error {
	target := int64(-1)
	if l.opts.RetentionTime > 0 {
		cutoff := l.opts.Now().Add(-l.opts.RetentionTime).UnixMilli()
		off, err := l.firstBatchAtOrAfter(ctx, cutoff)
		if err != nil {
			return err
		}
		target = off
	}
	if l.opts.RetentionBytes > 0 {
		l.mu.Lock()
		off := l.index.sizeTrimPoint(l.opts.RetentionBytes)
		l.mu.Unlock()
		target = max(target, off)
	}
	if target <= l.LogStartOffset() {
		return nil
	}
	return wrapErr(l.name, "retention", l.trim(ctx, min(target, l.HighWatermark())))
}

// firstBatchAtOrAfter returns the base offset of the first durable batch
// whose max timestamp is >= ts, or the high watermark when none is.
func (l *Log) firstBatchAtOrAfter(ctx context.Context, ts int64) (int64, error) {
	l.mu.Lock()
	from, hw := l.index.scanStart(ts, l.start), l.hw
	l.mu.Unlock()
	b, found, err := l.scanTimestamp(ctx, from, hw, ts)
	switch {
	case err != nil:
		return 0, wrapErr(l.name, "retention", err)
	case found:
		return b.BaseOffset, nil
	}
	return hw, nil
}
