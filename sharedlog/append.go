package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// Origin says who appends a batch.
type Origin int

const (
	// OriginClient is a Produce request: control batches are rejected.
	OriginClient Origin = iota
	// OriginCoordinator is a transaction coordinator writing markers
	// (WriteTxnMarkers): control batches are accepted.
	OriginCoordinator
)

// AppendOptions tune one append.
type AppendOptions struct {
	// Origin is OriginClient (the zero value) or OriginCoordinator.
	Origin Origin
}

// AppendResult is what a Produce response reports for a partition.
type AppendResult struct {
	// BaseOffset is the offset the batch's first record got.
	BaseOffset int64
	// LastOffset is the offset of its last record.
	LastOffset int64
	// LogAppendTime is the append time stamped on the batch, or -1 when the
	// log keeps CreateTime.
	LogAppendTime int64
	// LogStartOffset is the log start offset after the append.
	LogStartOffset int64
	// Duplicate: the batch repeated one of the producer's last five batches
	// and was not appended again; the offsets are the original's.
	Duplicate bool
}

// AppendFuture is the pending result of AppendAsync.
type AppendFuture struct {
	done chan struct{}
	res  AppendResult
	err  error
}

func newAppendFuture() *AppendFuture { return &AppendFuture{done: make(chan struct{})} }

// closedDone is the Done channel of futures completed when created.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func completedAppend(r AppendResult, err error) *AppendFuture {
	return &AppendFuture{done: closedDone, res: r, err: err}
}

func (f *AppendFuture) complete(r AppendResult, err error) {
	f.res, f.err = r, err
	close(f.done)
}

func failedAppend(err error) *AppendFuture { return completedAppend(AppendResult{}, err) }

// Done is closed when the append has completed.
func (f *AppendFuture) Done() <-chan struct{} { return f.done }

// Wait blocks until the append completes (its batch is durable, or it
// failed) or ctx ends; a ctx that ends first returns ctx.Err() and leaves the
// append running.
func (f *AppendFuture) Wait(ctx context.Context) (AppendResult, error) {
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return AppendResult{}, ctx.Err()
	}
}

type pending struct {
	fut  *stream.AppendFuture
	base int64
	last int64
	ts   int64
	f    *AppendFuture
}

// Append validates one record batch, assigns it offsets and returns once it
// is durable (or a duplicate of a recent batch of its producer). See
// AppendAsync.
func (l *Log) Append(ctx context.Context, batch []byte, opts AppendOptions) (AppendResult, error) {
	return l.AppendAsync(ctx, batch, opts).Wait(ctx)
}

// AppendAsync validates one record batch (exactly one v2 batch, as a
// Produce request carries per partition), checks it against its producer's
// state, assigns its offsets by rewriting its base offset and leader epoch
// in place (the log owns batch until the future completes: then neither
// the log nor its stream holds a reference to it) and starts appending
// it. Appends pipeline: offsets follow call order and many may be in
// flight; each future completes when its batch is durable. Validation
// failures complete the future at once with an *Error carrying the Kafka
// code and leave the log unchanged. With Options.MaxInflight appends
// awaiting their acks, it waits for one to complete first; if ctx ends
// before, the append fails with ctx.Err() and uses no offset. If an append
// fails in flight, it and every later one fail and the log accepts no more
// appends: the owner closes it and opens it again (which recovers the
// durable state).
func (l *Log) AppendAsync(ctx context.Context, batch []byte, opts AppendOptions) *AppendFuture {
	fail := func(err error) *AppendFuture { return failedAppend(wrapErr(l.name, "append", err)) }
	if len(batch) > l.opts.MaxBatchBytes {
		return fail(errorf(kerr.MessageTooLarge, "record batch of %d bytes exceeds the limit of %d", len(batch), l.opts.MaxBatchBytes))
	}
	h, err := parseBatch(batch, !l.opts.TrustCompressedRecords)
	if err != nil {
		return fail(err)
	}
	if h.Control() && opts.Origin != OriginCoordinator {
		return fail(errorf(kerr.InvalidRecord, "control batches are written by the transaction coordinator, not by producers"))
	}
	l.mu.Lock()
	for {
		if err := l.usable(); err != nil {
			l.mu.Unlock()
			return fail(err)
		}
		if l.queued < l.opts.MaxInflight {
			break
		}
		// MaxInflight appends await their acks: wait for one.
		space := waitCh(&l.space)
		l.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
		l.mu.Lock()
	}
	dup, err := l.prod.check(h)
	if err != nil || dup != nil {
		var d batchMeta
		if dup != nil {
			d = *dup
		}
		start := l.start
		l.mu.Unlock()
		if err != nil {
			return fail(err)
		}
		return l.duplicate(d, start)
	}
	base := l.next
	now := l.opts.Now().UnixMilli()
	appendTime, ts := int64(-1), h.MaxTimestamp
	if l.opts.LogAppendTime {
		appendTime, ts = now, now
	}
	sum := stampBatch(batch, base, l.opts.Epoch, appendTime)
	h.LeaderEpoch = l.opts.Epoch
	count := h.OffsetCount()
	// The payload checksum comes from the Kafka CRC checked above, so the
	// stream need not read the batch again to checksum it.
	fut := l.data.Append(l.ctx, stream.Batch{Count: uint32(count), Timestamp: ts, Payload: batch,
		PayloadChecksum: sum, PayloadChecksumSet: true})
	l.applyBatch(h, batch, base, ts, now, fut)
	l.next += count
	l.since += int64(len(batch))
	l.dirty = true
	if l.since >= l.opts.CheckpointBytes {
		l.request(bgCheckpoint)
	}
	last := base + count - 1
	if l.queued == 0 && fut.Completed() {
		// The stream acknowledged at once (a synchronous driver) and no
		// earlier append awaits its ack: settle here, without handing the
		// append to the collector goroutine and waking it.
		r, err := fut.Result()
		res, err := l.settle(base, last, appendTime, r, err)
		l.mu.Unlock()
		return completedAppend(res, err)
	}
	p := &pending{fut: fut, base: base, last: last, ts: appendTime, f: newAppendFuture()}
	l.queued++
	l.queue = append(l.queue, p)
	if !l.collecting {
		l.collecting = true
		l.collectors.Add(1)
		go l.collect()
	}
	l.mu.Unlock()
	return p.f
}

// Flush hints that no append follows for now (stream.Stream.Flush): the
// appends started may go to the backend without waiting out a linger. A
// broker calls it once it has started a Produce request's appends.
func (l *Log) Flush() { l.data.Flush() }

// usable reports why the log takes no appends; the caller holds mu.
func (l *Log) usable() error {
	if l.closed {
		return &Error{Code: kerr.NotLeaderForPartition.Code, Msg: "log is closed", Err: stream.ErrClosed}
	}
	return l.broken
}

// duplicate answers a retried batch with its original offsets once the
// original is durable.
func (l *Log) duplicate(d batchMeta, logStart int64) *AppendFuture {
	f := newAppendFuture()
	go func() {
		if d.fut != nil {
			if _, err := d.fut.Result(); err != nil {
				f.complete(AppendResult{}, wrapErr(l.name, "append", err))
				return
			}
		}
		ts := int64(-1)
		if l.opts.LogAppendTime {
			ts = d.Timestamp
		}
		f.complete(AppendResult{BaseOffset: d.FirstOffset, LastOffset: d.LastOffset, LogAppendTime: ts, LogStartOffset: logStart, Duplicate: true}, nil)
	}()
	return f
}

// collect completes appends in order as the stream acknowledges them,
// until none is queued (AppendAsync starts it again for the next one).
func (l *Log) collect() {
	defer l.collectors.Done()
	l.mu.Lock()
	for len(l.queue) > 0 {
		p := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.mu.Unlock()
		r, err := p.fut.Result()
		l.mu.Lock()
		res, err := l.settle(p.base, p.last, p.ts, r, err)
		l.queued--
		wake(&l.space)
		// Completed under mu, so that an append settled inline later
		// (AppendAsync) never completes before this one.
		p.f.complete(res, err)
	}
	l.queue = nil // the backing array of a burst is not kept while idle
	l.collecting = false
	l.mu.Unlock()
}

// settle applies the stream's outcome r, err of the append stamped with
// offsets [base, last] and returns what its future reports, checking that
// the stream put it at the offset it was stamped with; a failure breaks
// the log. The caller holds mu and settles appends in order.
func (l *Log) settle(base, last, appendTime int64, r stream.AppendResult, err error) (AppendResult, error) {
	if err == nil && r.BaseOffset != base {
		err = fmt.Errorf("%w: stream %q acknowledged the batch stamped with offset %d at offset %d (another writer?)", stream.ErrCorrupt, l.data.Name(), base, r.BaseOffset)
	}
	if err != nil {
		err = wrapErr(l.name, "append", err)
		if l.broken == nil {
			l.broken = err
			level := slog.LevelError
			if errors.Is(err, stream.ErrFenced) {
				level = slog.LevelInfo
			}
			l.opts.Logger.Log(l.ctx, level, "sharedlog: append failed; the log takes no more appends until reopened", "partition", l.name, "offset", base, "err", err)
			wake(&l.hwCh) // waitDurable returns the failure
		}
		return AppendResult{}, err
	}
	if r.NextOffset > l.hw {
		l.hw = r.NextOffset
		wake(&l.hwCh)
	}
	return AppendResult{BaseOffset: base, LastOffset: last, LogAppendTime: appendTime, LogStartOffset: l.start}, nil
}

// waitCh returns the channel *ch that wake closes, making it if need be.
// Such channels exist only while someone waits, so that the common case,
// nobody waiting, allocates none. The caller holds mu.
func waitCh(ch *chan struct{}) chan struct{} {
	if *ch == nil {
		*ch = make(chan struct{})
	}
	return *ch
}

// wake wakes the waiters on *ch, if any; the caller holds mu.
func wake(ch *chan struct{}) {
	if *ch != nil {
		close(*ch)
		*ch = nil
	}
}

// waitDurable waits until the high watermark reaches offset (or the log
// fails); with untilClosed it also gives up when the log is closed.
func (l *Log) waitDurable(ctx context.Context, offset int64, untilClosed bool) error {
	for {
		l.mu.Lock()
		hw, ch, broken, closed := l.hw, waitCh(&l.hwCh), l.broken, l.closed
		l.mu.Unlock()
		switch {
		case hw >= offset:
			return nil
		case broken != nil:
			return broken
		case closed && untilClosed:
			return &Error{Code: kerr.NotLeaderForPartition.Code, Partition: l.name, Msg: "log is closed", Err: stream.ErrClosed}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitHighWatermark blocks until the high watermark is at least offset, for
// a Fetch that waits for data (MaxWaitMs, MinBytes): call it with the fetch
// offset + 1 and a context that ends at the wait limit. It returns ctx.Err()
// when ctx ends first, and an error when the log fails or is closed.
func (l *Log) WaitHighWatermark(ctx context.Context, offset int64) error {
	return l.waitDurable(ctx, offset, true)
}
