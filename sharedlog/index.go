package sharedlog

import "sort"

// indexEntry is one entry of the sparse offset index: the batch starting at
// Offset begins Pos bytes into the partition's history, and every batch
// before it has a max timestamp <= MaxBefore (-1 when there is none).
type indexEntry struct {
	Offset    int64
	Pos       int64
	MaxBefore int64
}

// offsetIndex is the sparse index the log keeps for timestamp lookups and
// size retention: an entry every interval bytes of batches (and at the first
// batch). It is deterministic and does no I/O.
type offsetIndex struct {
	interval int64
	entries  []indexEntry
	// endPos is the byte position after the last batch; maxTs the largest
	// batch timestamp so far and maxTsOffset the last offset of the batch
	// that carried it; lastPos the position of the last entry.
	endPos      int64
	maxTs       int64
	maxTsOffset int64
}

func newOffsetIndex(interval int64) *offsetIndex {
	return &offsetIndex{interval: interval, maxTs: -1, maxTsOffset: -1}
}

// add records a batch at [base, base+count) of size bytes with max
// timestamp ts.
func (x *offsetIndex) add(base, count int64, size int, ts int64) {
	if n := len(x.entries); n == 0 || x.endPos-x.entries[n-1].Pos >= x.interval {
		x.entries = append(x.entries, indexEntry{Offset: base, Pos: x.endPos, MaxBefore: x.maxTs})
	}
	x.endPos += int64(size)
	if ts > x.maxTs {
		x.maxTs, x.maxTsOffset = ts, base+count-1
	}
}

// scanStart returns the offset from which a forward scan finds the first
// batch with a max timestamp >= ts: every batch before it is older.
func (x *offsetIndex) scanStart(ts int64, logStart int64) int64 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].MaxBefore >= ts })
	if i == 0 {
		return logStart
	}
	return max(x.entries[i-1].Offset, logStart)
}

// posOf returns the position of the last entry at or below offset: a lower
// bound of offset's byte position.
func (x *offsetIndex) posOf(offset int64) int64 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].Offset > offset })
	if i == 0 {
		return 0
	}
	return x.entries[i-1].Pos
}

// sizeTrimPoint returns the largest indexed batch offset whose removal of
// everything before it keeps at least keep bytes, or -1 when no entry
// qualifies (Kafka's rule: retention.bytes is a floor of what is kept).
func (x *offsetIndex) sizeTrimPoint(keep int64) int64 {
	limit := x.endPos - keep
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].Pos > limit })
	if i == 0 {
		return -1
	}
	return x.entries[i-1].Offset
}

// trim drops entries for batches wholly below logStart, keeping the last
// entry at or below it (it still locates logStart's batch).
func (x *offsetIndex) trim(logStart int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].Offset > logStart })
	if i > 1 {
		x.entries = append(x.entries[:0:0], x.entries[i-1:]...)
	}
}

// EpochEntry is one entry of the leader-epoch history: Epoch led the
// partition from StartOffset on.
type EpochEntry struct {
	// Epoch is the leader epoch.
	Epoch int32
	// StartOffset is the first offset written in Epoch.
	StartOffset int64
}

// epochHistory is the leader-epoch cache (Kafka's LeaderEpochFileCache):
// entries with increasing epochs and non-decreasing start offsets.
type epochHistory []EpochEntry

func (h epochHistory) latest() int32 {
	if len(h) == 0 {
		return -1
	}
	return h[len(h)-1].Epoch
}

// assign records that epoch starts at offset. An epoch not above the latest
// is ignored; entries starting at or after offset are replaced, as Kafka
// does (an epoch that wrote nothing leaves no entry).
func (h epochHistory) assign(epoch int32, offset int64) epochHistory {
	if epoch <= h.latest() {
		return h
	}
	for len(h) > 0 && h[len(h)-1].StartOffset >= offset {
		h = h[:len(h)-1]
	}
	return append(h, EpochEntry{Epoch: epoch, StartOffset: offset})
}

// endOffsetFor answers OffsetForLeaderEpoch as Kafka's
// LeaderEpochFileCache.endOffsetFor does: for the latest epoch the log end
// offset; for an older epoch the largest epoch <= it and the start offset of
// the epoch after; (-1, -1) for an epoch above the latest or an empty
// history; (epoch, first start offset) for an epoch below the earliest.
func (h epochHistory) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(h) == 0 {
		return -1, -1
	}
	if epoch == h.latest() {
		return epoch, logEnd
	}
	hi := sort.Search(len(h), func(i int) bool { return h[i].Epoch > epoch })
	if hi == len(h) {
		return -1, -1
	}
	if hi == 0 {
		return epoch, h[0].StartOffset
	}
	return h[hi-1].Epoch, h[hi].StartOffset
}

// trimStart drops entries wholly below logStart and moves the first kept
// entry's start up to it (Kafka's truncateFromStart).
func (h epochHistory) trimStart(logStart int64) epochHistory {
	i := sort.Search(len(h), func(i int) bool { return h[i].StartOffset > logStart })
	if i == 0 {
		return h
	}
	out := append(epochHistory(nil), h[i-1:]...)
	out[0].StartOffset = logStart
	return out
}
