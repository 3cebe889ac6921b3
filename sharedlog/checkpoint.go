package sharedlog

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/stratastream/strata/stream"
)

// The metadata stream holds two kinds of records, each one stream batch of
// Count 1 whose payload starts with a kind byte:
//
//	'E' epoch int32, start offset int64      a leader epoch began (written at Open)
//	'C' id uint64, part uint32, parts uint32, body   one part of a checkpoint
//
// A checkpoint's body (the parts' bodies concatenated) is the partition
// state as of data offset Next. A checkpoint is written only once every data
// batch below Next is acknowledged, and the metadata stream is trimmed to a
// checkpoint's first part once all its parts are acknowledged, so the
// stream holds the latest complete checkpoint, maybe a partial newer one,
// and the epoch records written since.
const (
	metaEpoch      = 'E'
	metaCheckpoint = 'C'

	checkpointVersion = 1
	metaPartHeader    = 1 + 8 + 4 + 4
)

// snapshot is the partition state a checkpoint holds.
type snapshot struct {
	Next      int64
	Epochs    epochHistory
	Index     offsetIndex
	Producers *producers
}

func encodeEpochRecord(e EpochEntry) []byte {
	b := []byte{metaEpoch}
	b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
	return binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
}

// encodeSnapshot serialises s.
func encodeSnapshot(s *snapshot) []byte {
	b := []byte{checkpointVersion}
	v := func(x int64) { b = binary.AppendVarint(b, x) }
	v(s.Next)
	v(int64(len(s.Epochs)))
	for _, e := range s.Epochs {
		v(int64(e.Epoch))
		v(e.StartOffset)
	}
	v(s.Index.endPos)
	v(s.Index.maxTs)
	v(s.Index.maxTsOffset)
	v(int64(len(s.Index.entries)))
	for _, e := range s.Index.entries {
		v(e.Offset)
		v(e.Pos)
		v(e.MaxBefore)
	}
	ids := make([]int64, 0, len(s.Producers.m))
	for id := range s.Producers.m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	v(int64(len(ids)))
	for _, id := range ids {
		e := s.Producers.m[id]
		v(id)
		v(int64(e.Epoch))
		v(e.TxnFirstOffset)
		v(e.LastAppendMs)
		v(int64(len(e.Batches)))
		for _, bm := range e.Batches {
			v(int64(bm.FirstSeq))
			v(int64(bm.LastSeq))
			v(bm.FirstOffset)
			v(bm.LastOffset - bm.FirstOffset)
			v(bm.Timestamp)
		}
	}
	v(int64(len(s.Producers.aborted)))
	for _, a := range s.Producers.aborted {
		v(a.ProducerID)
		v(a.FirstOffset)
		v(a.LastOffset)
	}
	return b
}

var errShortSnapshot = errors.New("truncated")

type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) v() int64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShortSnapshot
		return 0
	}
	r.b = r.b[n:]
	return x
}

// count reads a collection length, bounded by the bytes left (each element
// takes at least min bytes), so a corrupt length cannot make it allocate.
func (r *snapReader) count(min int) int {
	n := r.v()
	if n < 0 || n > int64(len(r.b)/min) {
		if r.err == nil {
			r.err = fmt.Errorf("collection length %d exceeds the %d bytes left", n, len(r.b))
		}
		return 0
	}
	return int(n)
}

// decodeSnapshot parses a checkpoint body; a malformed one is ErrCorrupt.
func decodeSnapshot(b []byte, interval int64) (*snapshot, error) {
	if len(b) == 0 || b[0] != checkpointVersion {
		return nil, fmt.Errorf("%w: checkpoint version byte %v, want %d", stream.ErrCorrupt, b[:min(1, len(b))], checkpointVersion)
	}
	r := &snapReader{b: b[1:]}
	s := &snapshot{Producers: newProducers()}
	s.Next = r.v()
	for range r.count(2) {
		s.Epochs = append(s.Epochs, EpochEntry{Epoch: int32(r.v()), StartOffset: r.v()})
	}
	s.Index = *newOffsetIndex(interval)
	s.Index.endPos, s.Index.maxTs, s.Index.maxTsOffset = r.v(), r.v(), r.v()
	n := r.count(3)
	s.Index.entries = make([]indexEntry, 0, n)
	for range n {
		s.Index.entries = append(s.Index.entries, indexEntry{Offset: r.v(), Pos: r.v(), MaxBefore: r.v()})
	}
	for range r.count(5) {
		id := r.v()
		e := &producerEntry{Epoch: int16(r.v()), TxnFirstOffset: r.v(), LastAppendMs: r.v()}
		nb := r.count(5)
		if nb > maxCachedBatches {
			r.err = fmt.Errorf("producer %d has %d cached batches", id, nb)
		}
		for range nb {
			bm := batchMeta{FirstSeq: int32(r.v()), LastSeq: int32(r.v()), FirstOffset: r.v()}
			bm.LastOffset = bm.FirstOffset + r.v()
			bm.Timestamp = r.v()
			e.Batches = append(e.Batches, bm)
		}
		s.Producers.m[id] = e
		if e.TxnFirstOffset >= 0 {
			s.Producers.open[id] = e.TxnFirstOffset
		}
	}
	for range r.count(3) {
		s.Producers.aborted = append(s.Producers.aborted, abortedTxn{ProducerID: r.v(), FirstOffset: r.v(), LastOffset: r.v()})
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the end", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %v", stream.ErrCorrupt, r.err)
	}
	return s, nil
}

// splitCheckpoint cuts body into metadata records of at most partBytes
// payload each.
func splitCheckpoint(id uint64, body []byte, partBytes int) [][]byte {
	chunk := max(partBytes-metaPartHeader, 1)
	parts := max((len(body)+chunk-1)/chunk, 1)
	out := make([][]byte, 0, parts)
	for i := range parts {
		lo, hi := i*chunk, min((i+1)*chunk, len(body))
		p := make([]byte, 0, metaPartHeader+hi-lo)
		p = append(p, metaCheckpoint)
		p = binary.BigEndian.AppendUint64(p, id)
		p = binary.BigEndian.AppendUint32(p, uint32(i))
		p = binary.BigEndian.AppendUint32(p, uint32(parts))
		out = append(out, append(p, body[lo:hi]...))
	}
	return out
}

// metaScan is what a read of the metadata stream found: the body of the
// latest complete checkpoint, the offset of its first part, and the epoch
// records after it.
type metaScan struct {
	body       []byte
	firstPart  int64
	epochsLate []EpochEntry
}

// scanMeta reads the records of the metadata stream in order.
func scanMeta(name string, batches []stream.Batch) (metaScan, error) {
	var (
		out     = metaScan{firstPart: -1}
		curID   uint64
		curNext uint32
		curBody []byte
		curAt   int64
		open    bool
	)
	for _, b := range batches {
		p := b.Payload
		if len(p) == 0 {
			return out, fmt.Errorf("%w: metadata stream %q: empty record at offset %d", stream.ErrCorrupt, name, b.BaseOffset)
		}
		switch p[0] {
		case metaEpoch:
			if len(p) != 13 {
				return out, fmt.Errorf("%w: metadata stream %q: epoch record of %d bytes at offset %d", stream.ErrCorrupt, name, len(p), b.BaseOffset)
			}
			out.epochsLate = append(out.epochsLate, EpochEntry{
				Epoch:       int32(binary.BigEndian.Uint32(p[1:])),
				StartOffset: int64(binary.BigEndian.Uint64(p[5:])),
			})
		case metaCheckpoint:
			if len(p) < metaPartHeader {
				return out, fmt.Errorf("%w: metadata stream %q: checkpoint part of %d bytes at offset %d", stream.ErrCorrupt, name, len(p), b.BaseOffset)
			}
			id := binary.BigEndian.Uint64(p[1:])
			part := binary.BigEndian.Uint32(p[9:])
			parts := binary.BigEndian.Uint32(p[13:])
			if part == 0 {
				curID, curNext, curBody, curAt, open = id, 0, nil, b.BaseOffset, true
			}
			if !open || id != curID || part != curNext {
				open = false // a part out of place: that checkpoint is incomplete
				continue
			}
			curBody = append(curBody, p[metaPartHeader:]...)
			curNext++
			if curNext == parts {
				out.body, out.firstPart, out.epochsLate = curBody, curAt, nil
				open = false
			}
		default:
			return out, fmt.Errorf("%w: metadata stream %q: unknown record kind %q at offset %d", stream.ErrCorrupt, name, p[0], b.BaseOffset)
		}
	}
	return out, nil
}

// Checkpoint writes the partition state (producers, epochs, index) to the
// metadata stream once every append made before the call is durable, so a
// later owner replays only what follows. The background work calls it
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
	if err := l.waitDurable(ctx, snap.Next, false); err != nil {
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
	// A trim is a durable write of its own (on stream sets, a record in
	// the stream's meta stream), so older checkpoints are trimmed only
	// every checkpointsPerTrim checkpoints or checkpointBytesPerTrim bytes:
	// a reader takes the latest complete one whatever precedes it.
	l.heldCkpts++
	for _, p := range parts {
		l.heldCkptBytes += int64(len(p))
	}
	if l.heldCkpts < checkpointsPerTrim && l.heldCkptBytes < checkpointBytesPerTrim {
		return nil
	}
	if err := l.meta.Trim(ctx, first); err != nil {
		return fmt.Errorf("trim %q to checkpoint at offset %d: %w", l.meta.Name(), first, err)
	}
	l.heldCkpts, l.heldCkptBytes = 0, 0
	return nil
}

// The metadata stream is trimmed to the latest checkpoint once it holds
// this many checkpoints, or this many bytes of them, since its last trim;
// an open reads at most about that much before the latest.
const (
	checkpointsPerTrim     = 8
	checkpointBytesPerTrim = 4 << 20
)
