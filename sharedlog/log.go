package sharedlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	data  *stream.Stream
	meta  *stream.Stream
	ctx   context.Context // lives until Close; stream appends use it
	abort context.CancelFunc

	bg bgWork // checkpoints and retention, on timers

	recovery RecoveryStats

	// heldCkpts and heldCkptBytes count the checkpoints written since the
	// metadata stream was last trimmed; guarded by ckptMu.
	heldCkpts     int
	heldCkptBytes int64

	ckptMu sync.Mutex    // serialises checkpoints and trims
	mu     sync.Mutex    // guards the fields below
	next   int64         // end of submitted appends (the log end offset)
	hw     int64         // end of acknowledged appends
	hwCh   chan struct{} // closed when hw moves; nil while nobody waits
	queued int           // appends handed to collect and not yet settled
	queue  []*pending    // those appends, in order; collect settles the first
	space  chan struct{} // closed when queued drops; nil while nobody waits
	start  int64
	prod   *producers
	index  *offsetIndex
	epochs epochHistory
	since  int64 // bytes appended since the last checkpoint
	dirty  bool
	closed bool
	broken error
	// collecting: a collect goroutine runs (it exits once queue is empty,
	// so an idle log has none); collectors counts it for Close.
	collecting bool
	collectors sync.WaitGroup
}

// Open opens partition on store as its owner at opts.Epoch, creating its
// streams if missing, and recovers its state: the latest checkpoint from the
// metadata stream plus a replay of the data written after it. An open with an
// epoch below the partition's is FENCED_LEADER_EPOCH.
func Open(ctx context.Context, store *stream.Store, partition string, opts Options) (*Log, error) {
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
	meta, data, err := openStreams(ctx, store, partition, stream.OpenOptions{Epoch: uint64(o.Epoch), CreateIfMissing: true})
	if err != nil {
		return nil, openErr(partition, o.Epoch, err)
	}
	lctx, abort := context.WithCancel(context.Background())
	l := &Log{
		name: partition, opts: o, data: data, meta: meta, ctx: lctx, abort: abort,
	}
	if err := l.recover(ctx); err != nil {
		abort()
		_ = data.Close()
		_ = meta.Close()
		return nil, wrapErr(partition, "open", err)
	}
	l.recovery.Duration = time.Since(began)
	l.startBackground()
	return l, nil
}

// openStreams opens the metadata and data streams of partition at once
// (an open on an object store is a dozen sequential requests or more; the
// two are independent), and closes the one that opened if the other fails.
func openStreams(ctx context.Context, store *stream.Store, partition string, so stream.OpenOptions) (meta, data *stream.Stream, err error) {
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, derr = store.Open(ctx, partition+DataSuffix, so)
	}()
	meta, err = store.Open(ctx, partition+MetaSuffix, so)
	<-done
	if err == nil && derr == nil {
		return meta, data, nil
	}
	if err == nil {
		_ = meta.Close()
	}
	if derr == nil {
		_ = data.Close()
	}
	return nil, nil, cmp.Or(err, derr)
}

func openErr(partition string, epoch int32, err error) error {
	if errors.Is(err, stream.ErrFenced) {
		return &Error{Code: kerr.FencedLeaderEpoch.Code, Partition: partition, Op: "open", Msg: fmt.Sprintf("epoch %d is below the partition's epoch", epoch), Err: err}
	}
	return wrapErr(partition, "open", err)
}

// Delete removes partition's streams from store (DeleteTopics). The
// partition must not be open.
func Delete(ctx context.Context, store *stream.Store, partition string) error {
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
func fetchAll(ctx context.Context, st *stream.Stream, from, to int64) ([]stream.Batch, error) {
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

// Close stops taking appends, waits for those in flight, writes a final
// checkpoint (unless the log failed or was fenced), stops the background
// work and closes the streams. It does not fence.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.collectors.Wait() // no collector starts once closed is set
	l.mu.Lock()
	wake(&l.hwCh)  // wake WaitHighWatermark callers: the log is closed
	wake(&l.space) // and appends waiting for room: they fail
	l.mu.Unlock()
	l.stopBackground()
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

// ProducerState is one producer id's state (DescribeProducers).
type ProducerState struct {
	// ProducerID is the producer id.
	ProducerID int64
	// ProducerEpoch is its current epoch.
	ProducerEpoch int16
	// LastSequence is the last sequence appended, -1 if none is kept.
	LastSequence int32
	// LastTimestamp is the max timestamp of its last batch, -1 if none.
	LastTimestamp int64
	// CurrentTxnStartOffset is the first offset of its open transaction,
	// -1 if none is open.
	CurrentTxnStartOffset int64
}

// Producers lists the producer state (DescribeProducers), by producer id.
func (l *Log) Producers() []ProducerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ProducerState, 0, len(l.prod.m))
	for id, e := range l.prod.m {
		ps := ProducerState{ProducerID: id, ProducerEpoch: e.Epoch, LastSequence: -1, LastTimestamp: -1, CurrentTxnStartOffset: e.TxnFirstOffset}
		if n := len(e.Batches); n > 0 {
			ps.LastSequence, ps.LastTimestamp = e.Batches[n-1].LastSeq, e.Batches[n-1].Timestamp
		}
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b ProducerState) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// Size is about how many bytes of record batches the partition holds
// (DescribeLogDirs): exact unless the log start lies inside an index
// interval, when it counts up to IndexIntervalBytes too many.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.index.endPos - l.index.posOf(l.start)
}
