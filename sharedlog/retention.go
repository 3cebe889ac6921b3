package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// Background tasks (bgWork.want).
const (
	bgRetention = 1 << iota
	bgCheckpoint
)

// bgWork runs a log's retention and checkpoints: a timer (no goroutine
// while nothing is due), and a goroutine that runs the due tasks one at a
// time and exits when none is left.
type bgWork struct {
	mu       sync.Mutex
	want     int // bgRetention | bgCheckpoint: due and not yet started
	running  bool
	stopped  bool        // by Close, or by a fence
	timer    *time.Timer // fires at the earlier of the two below
	nextRet  time.Time
	nextCkpt time.Time
	wg       sync.WaitGroup
}

// startBackground arms the background timer: retention is
// applied every RetentionCheckInterval and a checkpoint written every
// CheckpointInterval, until Close, or until a newer owner fenced the log:
// then that is logged once and the work stops (a fenced log can write
// nothing more).
func (l *Log) startBackground() {
	b := &l.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.nextRet, b.nextCkpt = now.Add(l.opts.RetentionCheckInterval), now.Add(l.opts.CheckpointInterval)
	b.timer = time.AfterFunc(min(l.opts.RetentionCheckInterval, l.opts.CheckpointInterval), l.due)
}

// due is the timer's function: it requests the tasks that are due and
// re-arms the timer for the next.
func (l *Log) due() {
	b := &l.bg
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	now, task := time.Now(), 0
	if !now.Before(b.nextRet) {
		task |= bgRetention
		b.nextRet = now.Add(l.opts.RetentionCheckInterval)
	}
	if !now.Before(b.nextCkpt) {
		task |= bgCheckpoint
		b.nextCkpt = now.Add(l.opts.CheckpointInterval)
	}
	next := b.nextRet
	if b.nextCkpt.Before(next) {
		next = b.nextCkpt
	}
	b.timer.Reset(next.Sub(now))
	b.mu.Unlock()
	if task != 0 {
		l.request(task)
	}
}

// request asks for task to run soon (at most one run of each task is
// pending at a time).
func (l *Log) request(task int) {
	b := &l.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.want |= task
	if !b.running {
		b.running = true
		b.wg.Add(1)
		go l.runBackground()
	}
}

// runBackground runs the due tasks until none is left.
func (l *Log) runBackground() {
	b := &l.bg
	defer b.wg.Done()
	for {
		b.mu.Lock()
		task := b.want
		if task&bgRetention != 0 {
			task = bgRetention
		}
		b.want &^= task
		if task == 0 || b.stopped {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		var err error
		if task == bgRetention {
			if err = l.ApplyRetention(l.ctx); err != nil && !errors.Is(err, stream.ErrFenced) {
				l.opts.Logger.Warn("sharedlog: retention failed", "partition", l.name, "err", err)
			}
		} else {
			err = l.backgroundCheckpoint()
		}
		if errors.Is(err, stream.ErrFenced) {
			l.opts.Logger.Info("sharedlog: a newer owner holds the partition; background checkpoints and retention stop", "partition", l.name, "err", err)
			b.mu.Lock()
			b.stopLocked()
			b.running = false
			b.mu.Unlock()
			return
		}
	}
}

func (b *bgWork) stopLocked() {
	b.stopped = true
	b.want = 0
	b.timer.Stop()
}

// stopBackground stops the timers and waits for a task that runs.
func (l *Log) stopBackground() {
	b := &l.bg
	b.mu.Lock()
	b.stopLocked()
	b.mu.Unlock()
	b.wg.Wait()
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
// RetentionBytes now (the background work calls it every
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
