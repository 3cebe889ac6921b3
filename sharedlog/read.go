package sharedlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
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

// Read returns whole record batches from the one holding offset on, as a
// Kafka Fetch would: up to the high watermark (ReadUncommitted) or the last
// stable offset (ReadCommitted), about opts.MaxBytes but at least one batch
// if any. offset below the log start or above the log end offset is
// OFFSET_OUT_OF_RANGE; at or past the readable end it returns no batches.
// When a batch cannot be read because its stored bytes are corrupt, Read
// returns the error together with the intact batches before it (in
// Batches), so that a reader can consume up to the damage.
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
	if err != nil && errors.Is(err, stream.ErrCorrupt) {
		bs, err = l.readIntact(ctx, offset, end, opts.MaxBytes)
	} else if err != nil {
		bs, err = nil, fmt.Errorf("fetch %q at offset %d: %w", l.data.Name(), offset, err)
	}
	if err != nil {
		for _, b := range bs {
			res.Batches = append(res.Batches, b.Payload)
		}
		return res, wrapErr(l.name, "read", err)
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

// readIntact reads [offset, end) one batch at a time, up to maxBytes (<= 0:
// one batch), and returns the batches read before the first that fails,
// and that failure (a store may read ahead of a batch; one batch at a time
// it reads only the chunk holding it).
func (l *Log) readIntact(ctx context.Context, offset, end int64, maxBytes int) ([]stream.Batch, error) {
	var out []stream.Batch
	size := 0
	for offset < end && (size == 0 || size < maxBytes) {
		// [offset, offset+1): only the chunk holding offset is read.
		bs, err := l.data.Fetch(ctx, offset, offset+1, 1)
		if err != nil {
			return out, fmt.Errorf("fetch %q at offset %d: %w", l.data.Name(), offset, err)
		}
		if len(bs) == 0 {
			break
		}
		out = append(out, bs[0])
		size += len(bs[0].Payload)
		offset = bs[0].EndOffset()
	}
	return out, nil
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
	b, found, err := l.scanTimestamp(ctx, scan, limit, timestamp)
	if err != nil {
		return Offset{}, wrapErr(l.name, "list offsets", err)
	}
	if !found {
		return Offset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, nil
	}
	off, ts := offsetInBatch(b, timestamp)
	off = max(off, start)
	return Offset{Offset: off, Timestamp: ts, LeaderEpoch: l.epochAt(off)}, nil
}

// scanTimestamp returns the first batch in [from, limit) whose max
// timestamp is >= ts, reading forward 1 MiB at a time; found is false when
// there is none.
func (l *Log) scanTimestamp(ctx context.Context, from, limit, ts int64) (b stream.Batch, found bool, err error) {
	for from < limit {
		bs, err := l.data.Fetch(ctx, from, limit, 1<<20)
		if err != nil {
			return b, false, fmt.Errorf("scan %q from offset %d for timestamp %d: %w", l.data.Name(), from, ts, err)
		}
		if len(bs) == 0 {
			break
		}
		for _, b := range bs {
			if b.Timestamp >= ts {
				return b, true, nil
			}
		}
		from = bs[len(bs)-1].EndOffset()
	}
	return b, false, nil
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
