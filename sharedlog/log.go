package sharedlog

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// Stream names of a partition: Open(store, "orders-3") keeps its record
// batches in "orders-3/data" and its checkpoints and epoch records in
// "orders-3/meta".
const (
	DataSuffix = "/data"
	MetaSuffix = "/meta"
)

// Special timestamps of ListOffsets.
const (
	LatestTimestamp        = -1 // the high watermark (or LSO for READ_COMMITTED)
	EarliestTimestamp      = -2 // the log start offset
	MaxTimestamp           = -3 // the batch with the largest timestamp (KIP-734)
	EarliestLocalTimestamp = -4 // same as EarliestTimestamp: everything is "local"
)

// Isolation is a Fetch/ListOffsets isolation level.
type Isolation int8

const (
	// ReadUncommitted reads up to the high watermark.
	ReadUncommitted Isolation = 0
	// ReadCommitted reads up to the last stable offset and reports aborted
	// transactions.
	ReadCommitted Isolation = 1
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

func (f *AppendFuture) complete(r AppendResult, err error) {
	f.res, f.err = r, err
	close(f.done)
}

func failedAppend(err error) *AppendFuture {
	f := newAppendFuture()
	f.complete(AppendResult{}, err)
	return f
}

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

// AbortedTransaction is an entry of a Fetch response's aborted transactions.
type AbortedTransaction struct {
	// ProducerID is the producer whose transaction aborted.
	ProducerID int64
	// FirstOffset is the transaction's first offset.
	FirstOffset int64
}

// ReadOptions tune a Read.
type ReadOptions struct {
	// MaxBytes bounds the bytes returned (at least one batch is returned
	// when one exists); <= 0 means the store's maximum fetch size.
	MaxBytes int
	// Isolation is ReadUncommitted (up to the high watermark) or
	// ReadCommitted (up to the last stable offset).
	Isolation Isolation
}

// ReadResult is what a Fetch response reports for a partition.
type ReadResult struct {
	// Batches are whole record batches in offset order, the first one
	// holding the requested offset; each is exactly as appended with its
	// base offset and leader epoch assigned.
	Batches [][]byte
	// HighWatermark is the end of durable data.
	HighWatermark int64
	// LastStableOffset is the first offset of the earliest open
	// transaction, or the high watermark.
	LastStableOffset int64
	// LogStartOffset is the first offset that may be read.
	LogStartOffset int64
	// AbortedTransactions overlap the returned batches (ReadCommitted only).
	AbortedTransactions []AbortedTransaction
}

// Records returns the batches concatenated: a Fetch response's records
// field.
func (r ReadResult) Records() []byte {
	n := 0
	for _, b := range r.Batches {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for _, b := range r.Batches {
		out = append(out, b...)
	}
	return out
}

// Offset is a ListOffsets answer.
type Offset struct {
	// Offset is the offset found, -1 if none.
	Offset int64
	// Timestamp is the timestamp of the batch found, -1 if not applicable.
	Timestamp int64
	// LeaderEpoch is the leader epoch of Offset, -1 if unknown.
	LeaderEpoch int32
}

// RecoveryStats says what Open did to rebuild the partition state.
type RecoveryStats struct {
	// CheckpointNext is the data offset the loaded checkpoint covers (-1:
	// no checkpoint, the whole log was replayed).
	CheckpointNext int64
	// ReplayedBatches and ReplayedBytes are the tail of the data stream
	// replayed after the checkpoint.
	ReplayedBatches int
	ReplayedBytes   int64
	// Producers is the number of producer ids in the recovered state.
	Producers int
	// Duration is how long Open took.
	Duration time.Duration
}

// Log is one Kafka partition owned by this process: appends assign offsets
// and keep the producer state; reads, offset lookups and trims serve
// consumers. Its methods are safe for concurrent use. Open with a higher
// epoch elsewhere fences it: its appends then fail with
// NOT_LEADER_OR_FOLLOWER.
type Log struct {
	name  string
	opts  Options
	data  stream.Stream
	meta  stream.Stream
	ctx   context.Context // lives until Close; stream appends use it
	abort context.CancelFunc

	tokens chan struct{}
	queue  chan *pending
	ackEnd chan struct{}
	kick   chan struct{}
	stop   chan struct{}
	bgEnd  chan struct{}

	recovery RecoveryStats

	ckptMu sync.Mutex // serialises checkpoints and trims
	mu     sync.Mutex // guards the fields below
	next   int64      // end of submitted appends (the log end offset)
	hw     int64      // end of acknowledged appends
	hwCh   chan struct{}
	start  int64
	prod   *producers
	index  *offsetIndex
	epochs epochHistory
	since  int64 // bytes appended since the last checkpoint
	dirty  bool
	closed bool
	broken error
}

type pending struct {
	fut  *stream.AppendFuture
	base int64
	last int64
	ts   int64
	f    *AppendFuture
}

// Open opens partition on store as its owner at opts.Epoch, creating its
// streams if missing, and recovers its state: the latest checkpoint from the
// metadata stream plus a replay of the data written after it. An open with an
// epoch below the partition's is FENCED_LEADER_EPOCH.
func Open(ctx context.Context, store stream.Store, partition string, opts Options) (*Log, error) {
	began := time.Now()
	for _, n := range []string{partition + DataSuffix, partition + MetaSuffix} {
		if err := stream.ValidateName(n); err != nil {
			return nil, &Error{Code: kerr.InvalidRequest.Code, Partition: partition, Op: "open", Msg: "bad partition name", Err: err}
		}
	}
	o, err := opts.withDefaults(store.Info())
	if err != nil {
		return nil, &Error{Code: kerr.InvalidRequest.Code, Partition: partition, Op: "open", Err: err}
	}
	so := stream.OpenOptions{Epoch: uint64(o.Epoch), CreateIfMissing: true}
	meta, err := store.Open(ctx, partition+MetaSuffix, so)
	if err != nil {
		return nil, openErr(partition, o.Epoch, err)
	}
	data, err := store.Open(ctx, partition+DataSuffix, so)
	if err != nil {
		_ = meta.Close()
		return nil, openErr(partition, o.Epoch, err)
	}
	lctx, abort := context.WithCancel(context.Background())
	l := &Log{
		name: partition, opts: o, data: data, meta: meta, ctx: lctx, abort: abort,
		tokens: make(chan struct{}, o.MaxInflight),
		queue:  make(chan *pending, o.MaxInflight),
		ackEnd: make(chan struct{}),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		bgEnd:  make(chan struct{}),
		hwCh:   make(chan struct{}),
	}
	if err := l.recover(ctx); err != nil {
		abort()
		_ = data.Close()
		_ = meta.Close()
		return nil, wrapErr(partition, "open", err)
	}
	l.recovery.Duration = time.Since(began)
	go l.collect()
	go l.background()
	return l, nil
}

func openErr(partition string, epoch int32, err error) error {
	if errors.Is(err, stream.ErrFenced) {
		return &Error{Code: kerr.FencedLeaderEpoch.Code, Partition: partition, Op: "open", Msg: fmt.Sprintf("epoch %d is below the partition's epoch", epoch), Err: err}
	}
	return wrapErr(partition, "open", err)
}

// Delete removes partition's streams from store (DeleteTopics). The
// partition must not be open.
func Delete(ctx context.Context, store stream.Store, partition string) error {
	var errs []error
	for _, n := range []string{partition + DataSuffix, partition + MetaSuffix} {
		if err := store.Delete(ctx, n); err != nil && !errors.Is(err, stream.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return wrapErr(partition, "delete", errors.Join(errs...))
}

// recover loads the latest checkpoint, replays the data after it and records
// this owner's epoch.
func (l *Log) recover(ctx context.Context) error {
	metaBatches, err := fetchAll(ctx, l.meta, l.meta.StartOffset(), stream.NoEnd)
	if err != nil {
		return err
	}
	scan, err := scanMeta(l.meta.Name(), metaBatches)
	if err != nil {
		return err
	}
	interval := int64(l.opts.IndexIntervalBytes)
	snap := &snapshot{Next: -1, Index: *newOffsetIndex(interval), Producers: newProducers()}
	if scan.body != nil {
		s, err := decodeSnapshot(scan.body, interval)
		if err != nil {
			return fmt.Errorf("metadata stream %q checkpoint at offset %d: %w", l.meta.Name(), scan.firstPart, err)
		}
		if s.Next > l.data.NextOffset() {
			l.opts.Logger.Warn("sharedlog: checkpoint is ahead of the data; replaying the whole log",
				"partition", l.name, "checkpoint_next", s.Next, "data_next", l.data.NextOffset())
		} else {
			snap = s
		}
	}
	l.recovery.CheckpointNext = snap.Next
	l.prod, l.index, l.epochs = snap.Producers, &snap.Index, snap.Epochs
	for _, e := range scan.epochsLate {
		l.epochs = l.epochs.assign(e.Epoch, e.StartOffset)
	}
	l.start, l.next = l.data.StartOffset(), l.data.NextOffset()
	from := max(snap.Next, l.start)
	now := l.opts.Now().UnixMilli()
	for from < l.next {
		bs, err := l.data.Fetch(ctx, from, l.next, 0)
		if err != nil {
			return fmt.Errorf("replay %q from offset %d: %w", l.data.Name(), from, err)
		}
		if len(bs) == 0 {
			break
		}
		for _, b := range bs {
			if b.EndOffset() <= from {
				continue
			}
			if len(b.Payload) < BatchHeaderSize {
				return fmt.Errorf("%w: replay %q: batch at offset %d has %d bytes, not a record batch", stream.ErrCorrupt, l.data.Name(), b.BaseOffset, len(b.Payload))
			}
			h := readHeader(b.Payload)
			if b.BaseOffset >= max(snap.Next, 0) {
				l.applyBatch(h, b.Payload, b.BaseOffset, b.Timestamp, now, nil)
				l.recovery.ReplayedBatches++
				l.recovery.ReplayedBytes += int64(len(b.Payload))
			}
			from = b.EndOffset()
		}
	}
	l.hw = l.next
	l.index.trim(l.start)
	l.epochs = l.epochs.trimStart(l.start)
	if latest := l.epochs.latest(); l.opts.Epoch < latest {
		return &Error{Code: kerr.FencedLeaderEpoch.Code, Msg: fmt.Sprintf("epoch %d is below the partition's latest leader epoch %d", l.opts.Epoch, latest)}
	} else if l.opts.Epoch > latest {
		e := EpochEntry{Epoch: l.opts.Epoch, StartOffset: l.next}
		if _, err := stream.Append(ctx, l.meta, stream.Batch{Count: 1, Timestamp: now, Payload: encodeEpochRecord(e)}); err != nil {
			return fmt.Errorf("record leader epoch %d in %q: %w", e.Epoch, l.meta.Name(), err)
		}
		l.epochs = l.epochs.assign(e.Epoch, e.StartOffset)
		l.dirty = true
	}
	l.recovery.Producers = len(l.prod.m)
	return nil
}

// applyBatch updates the state for a batch at base; the caller holds mu (or
// owns l during recovery).
func (l *Log) applyBatch(h BatchHeader, payload []byte, base, ts, nowMs int64, fut *stream.AppendFuture) {
	l.prod.apply(h, base, ts, controlType(payload, h), nowMs, fut)
	l.index.add(base, h.OffsetCount(), len(payload), ts)
	l.epochs = l.epochs.assign(h.LeaderEpoch, base)
}

// fetchAll reads every batch of st in [from, to).
func fetchAll(ctx context.Context, st stream.Stream, from, to int64) ([]stream.Batch, error) {
	var out []stream.Batch
	for from < min(to, st.NextOffset()) {
		bs, err := st.Fetch(ctx, from, to, 0)
		if err != nil {
			return nil, fmt.Errorf("read %q from offset %d: %w", st.Name(), from, err)
		}
		if len(bs) == 0 {
			break
		}
		out = append(out, bs...)
		from = bs[len(bs)-1].EndOffset()
	}
	return out, nil
}

// Name is the partition name the log was opened with.
func (l *Log) Name() string { return l.name }

// Epoch is the leader epoch the log was opened with.
func (l *Log) Epoch() int32 { return l.opts.Epoch }

// Recovery reports what Open replayed.
func (l *Log) Recovery() RecoveryStats { return l.recovery }

// Append validates one record batch, assigns it offsets and returns once it
// is durable (or a duplicate of a recent batch of its producer). See
// AppendAsync.
func (l *Log) Append(ctx context.Context, batch []byte, opts AppendOptions) (AppendResult, error) {
	return l.AppendAsync(ctx, batch, opts).Wait(ctx)
}

// AppendAsync validates one record batch (exactly one v2 batch, as a
// Produce request carries per partition), checks it against its producer's
// state, assigns its offsets by rewriting its base offset and leader epoch
// in place (the log owns batch from now on) and starts appending it. Appends
// pipeline: offsets follow call order and many may be in flight; each future
// completes when its batch is durable. Validation failures complete the
// future at once with an *Error carrying the Kafka code and leave the log
// unchanged. If an append fails in flight, it and every later one fail and
// the log accepts no more appends: the owner closes it and opens it again
// (which recovers the durable state).
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
	select {
	case l.tokens <- struct{}{}:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		<-l.tokens
		return fail(err)
	}
	dup, err := l.prod.check(h)
	if err != nil || dup != nil {
		var d batchMeta
		if dup != nil {
			d = *dup
		}
		start := l.start
		l.mu.Unlock()
		<-l.tokens
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
	stampBatch(batch, base, l.opts.Epoch, appendTime)
	h.LeaderEpoch = l.opts.Epoch
	count := h.OffsetCount()
	fut := l.data.Append(l.ctx, stream.Batch{Count: uint32(count), Timestamp: ts, Payload: batch})
	l.applyBatch(h, batch, base, ts, now, fut)
	l.next += count
	l.since += int64(len(batch))
	l.dirty = true
	if l.since >= l.opts.CheckpointBytes {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	p := &pending{fut: fut, base: base, last: base + count - 1, ts: appendTime, f: newAppendFuture()}
	l.queue <- p // never blocks: the token reserved a slot
	l.mu.Unlock()
	return p.f
}

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
// checking each got the offset it was stamped with.
func (l *Log) collect() {
	defer close(l.ackEnd)
	for p := range l.queue {
		r, err := p.fut.Result()
		if err == nil && r.BaseOffset != p.base {
			err = fmt.Errorf("%w: stream %q acknowledged the batch stamped with offset %d at offset %d (another writer?)", stream.ErrCorrupt, l.data.Name(), p.base, r.BaseOffset)
		}
		l.mu.Lock()
		if err != nil {
			err = wrapErr(l.name, "append", err)
			if l.broken == nil {
				l.broken = err
				level := slog.LevelError
				if errors.Is(err, stream.ErrFenced) {
					level = slog.LevelInfo
				}
				l.opts.Logger.Log(l.ctx, level, "sharedlog: append failed; the log takes no more appends until reopened", "partition", l.name, "offset", p.base, "err", err)
			}
		} else if r.NextOffset > l.hw {
			l.hw = r.NextOffset
			close(l.hwCh)
			l.hwCh = make(chan struct{})
		}
		start := l.start
		l.mu.Unlock()
		if err != nil {
			p.f.complete(AppendResult{}, err)
		} else {
			p.f.complete(AppendResult{BaseOffset: p.base, LastOffset: p.last, LogAppendTime: p.ts, LogStartOffset: start}, nil)
		}
		<-l.tokens
	}
}

// waitDurable waits until the high watermark reaches offset.
func (l *Log) waitDurable(ctx context.Context, offset int64) error {
	for {
		l.mu.Lock()
		hw, ch, broken := l.hw, l.hwCh, l.broken
		l.mu.Unlock()
		if hw >= offset {
			return nil
		}
		if broken != nil {
			return broken
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// HighWatermark is the end of durable (acknowledged) data.
func (l *Log) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw
}

// LogEndOffset is the end of appended data, durable or in flight.
func (l *Log) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// LastStableOffset is the first offset of the earliest open transaction, or
// the high watermark when it is lower or no transaction is open.
func (l *Log) LastStableOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lso()
}

func (l *Log) lso() int64 {
	if f := l.prod.firstUnstable(); f >= 0 && f < l.hw {
		return f
	}
	return l.hw
}

// LeaderEpochs returns a copy of the leader-epoch history.
func (l *Log) LeaderEpochs() []EpochEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]EpochEntry(nil), l.epochs...)
}

// Read returns whole record batches from the one holding offset on, as a
// Kafka Fetch would: up to the high watermark (ReadUncommitted) or the last
// stable offset (ReadCommitted), about opts.MaxBytes but at least one batch
// if any. offset below the log start or above the log end offset is
// OFFSET_OUT_OF_RANGE; at or past the readable end it returns no batches.
func (l *Log) Read(ctx context.Context, offset int64, opts ReadOptions) (ReadResult, error) {
	l.mu.Lock()
	res := ReadResult{HighWatermark: l.hw, LastStableOffset: l.lso(), LogStartOffset: l.start}
	leo := l.next
	l.mu.Unlock()
	if offset < res.LogStartOffset || offset > leo {
		return res, &Error{Code: kerr.OffsetOutOfRange.Code, Partition: l.name, Op: "read",
			Msg: fmt.Sprintf("offset %d is outside [%d, %d]", offset, res.LogStartOffset, leo)}
	}
	end := res.HighWatermark
	if opts.Isolation == ReadCommitted {
		end = res.LastStableOffset
	}
	if offset >= end {
		return res, nil
	}
	bs, err := l.data.Fetch(ctx, offset, end, opts.MaxBytes)
	if err != nil {
		return res, wrapErr(l.name, "read", fmt.Errorf("fetch %q at offset %d: %w", l.data.Name(), offset, err))
	}
	res.Batches = make([][]byte, len(bs))
	for i, b := range bs {
		res.Batches[i] = b.Payload
	}
	if opts.Isolation == ReadCommitted && len(bs) > 0 {
		l.mu.Lock()
		res.AbortedTransactions = l.prod.abortedIn(offset, bs[len(bs)-1].EndOffset())
		l.mu.Unlock()
	}
	return res, nil
}

// ListOffsets answers a ListOffsets request for timestamp: LatestTimestamp
// (-1), EarliestTimestamp (-2), MaxTimestamp (-3), EarliestLocalTimestamp
// (-4), or a time in ms, for which it returns the first offset whose record
// timestamp is >= it (exact within uncompressed batches; the batch's base
// offset within compressed ones), or Offset -1 when there is none.
func (l *Log) ListOffsets(ctx context.Context, timestamp int64, iso Isolation) (Offset, error) {
	l.mu.Lock()
	start, hw, lso := l.start, l.hw, l.lso()
	maxTs, maxTsOff := l.index.maxTs, l.index.maxTsOffset
	scan := l.index.scanStart(timestamp, start)
	l.mu.Unlock()
	limit := hw
	if iso == ReadCommitted {
		limit = lso
	}
	switch timestamp {
	case LatestTimestamp:
		return Offset{Offset: limit, Timestamp: -1, LeaderEpoch: l.epochAt(limit)}, nil
	case EarliestTimestamp, EarliestLocalTimestamp:
		return Offset{Offset: start, Timestamp: -1, LeaderEpoch: l.epochAt(start)}, nil
	case MaxTimestamp:
		if maxTsOff < start || maxTsOff >= limit {
			return Offset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, nil
		}
		return Offset{Offset: maxTsOff, Timestamp: maxTs, LeaderEpoch: l.epochAt(maxTsOff)}, nil
	}
	if timestamp < 0 {
		return Offset{}, &Error{Code: kerr.InvalidRequest.Code, Partition: l.name, Op: "list offsets", Msg: fmt.Sprintf("timestamp %d is not a time or a known special value", timestamp)}
	}
	for from := scan; from < limit; {
		bs, err := l.data.Fetch(ctx, from, limit, 1<<20)
		if err != nil {
			return Offset{}, wrapErr(l.name, "list offsets", fmt.Errorf("scan %q from offset %d for timestamp %d: %w", l.data.Name(), from, timestamp, err))
		}
		if len(bs) == 0 {
			break
		}
		for _, b := range bs {
			if b.Timestamp >= timestamp {
				off, ts := offsetInBatch(b, timestamp)
				off = max(off, start)
				return Offset{Offset: off, Timestamp: ts, LeaderEpoch: l.epochAt(off)}, nil
			}
		}
		from = bs[len(bs)-1].EndOffset()
	}
	return Offset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, nil
}

// offsetInBatch finds the first record of b with a timestamp >= ts (b's max
// timestamp is), decompressing a compressed batch. LogAppendTime batches
// (and batches that cannot be decoded) answer with the base offset and the
// batch timestamp.
func offsetInBatch(b stream.Batch, ts int64) (int64, int64) {
	h := readHeader(b.Payload)
	if h.LogAppendTime() {
		return b.BaseOffset, b.Timestamp
	}
	recs, err := batchRecords(b.Payload, h, MaxDecompressedBytes)
	if err != nil {
		return b.BaseOffset, b.Timestamp
	}
	off, found := b.BaseOffset, b.Timestamp
	_ = walkRecords(recs, h.NumRecords, func(r record) bool {
		if t := h.BaseTimestamp + r.TimestampDelta; t >= ts {
			off, found = b.BaseOffset+int64(r.OffsetDelta), t
			return false
		}
		return true
	})
	return off, found
}

// epochAt is the leader epoch that wrote offset, -1 if unknown.
func (l *Log) epochAt(offset int64) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := int32(-1)
	for _, x := range l.epochs {
		if x.StartOffset > offset {
			break
		}
		e = x.Epoch
	}
	return e
}

// OffsetForLeaderEpoch answers an OffsetForLeaderEpoch request: the largest
// epoch <= epoch in the history and the end offset of that epoch (the high
// watermark for the current epoch); (-1, -1) for an unknown epoch above the
// latest.
func (l *Log) OffsetForLeaderEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.endOffsetFor(epoch, l.hw)
}

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

// Checkpoint writes the partition state (producers, epochs, index) to the
// metadata stream once every append made before the call is durable, so a
// later owner replays only what follows. The background goroutine calls it
// every CheckpointBytes or CheckpointInterval, and Close calls it.
func (l *Log) Checkpoint(ctx context.Context) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	if !l.dirty {
		l.mu.Unlock()
		return nil
	}
	l.prod.expire(l.opts.Now().Add(-l.opts.ProducerExpiry).UnixMilli(), l.start)
	idx := *l.index
	idx.entries = append([]indexEntry(nil), l.index.entries...)
	snap := &snapshot{Next: l.next, Epochs: append(epochHistory(nil), l.epochs...), Index: idx, Producers: l.prod.clone()}
	l.dirty, l.since = false, 0
	l.mu.Unlock()
	err := l.writeCheckpoint(ctx, snap)
	if err != nil {
		l.mu.Lock()
		l.dirty = true
		l.mu.Unlock()
		return wrapErr(l.name, "checkpoint", err)
	}
	return nil
}

func (l *Log) writeCheckpoint(ctx context.Context, snap *snapshot) error {
	if err := l.waitDurable(ctx, snap.Next); err != nil {
		return err
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	partBytes := min(l.opts.MaxBatchBytes, 4<<20)
	parts := splitCheckpoint(binary.BigEndian.Uint64(idb[:]), encodeSnapshot(snap), partBytes)
	now := l.opts.Now().UnixMilli()
	futs := make([]*stream.AppendFuture, len(parts))
	for i, p := range parts {
		futs[i] = l.meta.Append(ctx, stream.Batch{Count: 1, Timestamp: now, Payload: p})
	}
	first := int64(-1)
	for i, f := range futs {
		r, err := f.Wait(ctx)
		if err != nil {
			return fmt.Errorf("write checkpoint part %d of %d to %q: %w", i, len(parts), l.meta.Name(), err)
		}
		if i == 0 {
			first = r.BaseOffset
		}
	}
	if err := l.meta.Trim(ctx, first); err != nil {
		return fmt.Errorf("trim %q to checkpoint at offset %d: %w", l.meta.Name(), first, err)
	}
	return nil
}

// background applies retention and writes checkpoints until Close.
func (l *Log) background() {
	defer close(l.bgEnd)
	retention := time.NewTicker(l.opts.RetentionCheckInterval)
	defer retention.Stop()
	ckpt := time.NewTicker(l.opts.CheckpointInterval)
	defer ckpt.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-retention.C:
			if err := l.ApplyRetention(l.ctx); err != nil {
				l.opts.Logger.Warn("sharedlog: retention failed", "partition", l.name, "err", err)
			}
		case <-ckpt.C:
			l.backgroundCheckpoint()
		case <-l.kick:
			l.backgroundCheckpoint()
		}
	}
}

func (l *Log) backgroundCheckpoint() {
	err := l.Checkpoint(l.ctx)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
	case errors.Is(err, stream.ErrFenced):
		l.opts.Logger.Info("sharedlog: checkpoint skipped: a newer owner holds the partition", "partition", l.name, "err", err)
	default:
		l.opts.Logger.Warn("sharedlog: checkpoint failed", "partition", l.name, "err", err)
	}
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
	for from < hw {
		bs, err := l.data.Fetch(ctx, from, hw, 1<<20)
		if err != nil {
			return 0, wrapErr(l.name, "retention", fmt.Errorf("scan %q from offset %d: %w", l.data.Name(), from, err))
		}
		if len(bs) == 0 {
			break
		}
		for _, b := range bs {
			if b.Timestamp >= ts {
				return max(b.BaseOffset, from), nil
			}
		}
		from = bs[len(bs)-1].EndOffset()
	}
	return hw, nil
}

// Close stops taking appends, waits for those in flight, writes a final
// checkpoint (unless the log failed or was fenced), stops the background
// goroutine and closes the streams. It does not fence.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	l.mu.Unlock()
	<-l.ackEnd
	close(l.stop)
	<-l.bgEnd
	var errs []error
	l.mu.Lock()
	broken := l.broken
	l.mu.Unlock()
	if broken == nil {
		ctx, cancel := context.WithTimeout(l.ctx, time.Minute)
		if err := l.Checkpoint(ctx); err != nil && !errors.Is(err, stream.ErrFenced) {
			errs = append(errs, err)
		}
		cancel()
	}
	l.abort()
	errs = append(errs, l.data.Close(), l.meta.Close())
	return wrapErr(l.name, "close", errors.Join(errs...))
}
