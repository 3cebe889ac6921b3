package sharedlog

import (
	"maps"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// maxCachedBatches is how many recent batches per producer are kept for
// duplicate detection (Kafka's max.in.flight.requests.per.connection bound).
const maxCachedBatches = 5

// batchMeta is what the producer state remembers of one appended batch.
type batchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	Timestamp               int64 // max timestamp as stored
	// fut is the stream append of the batch while it may be in flight
	// (nil after a recovery): a duplicate waits on it before answering.
	fut *stream.AppendFuture
}

// producerEntry is the state of one producer id.
type producerEntry struct {
	Epoch   int16
	Batches []batchMeta // oldest first, at most maxCachedBatches
	// TxnFirstOffset is the first offset of the producer's open
	// transaction, -1 when none is open.
	TxnFirstOffset int64
	// LastAppendMs is the wall time of the producer's last append, for
	// expiry.
	LastAppendMs int64
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// abortedTxn is an aborted transaction: the range of offsets a
// READ_COMMITTED consumer must skip for ProducerID.
type abortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // offset of the abort marker
}

// producers is the producer state of a partition: deterministic, no I/O.
type producers struct {
	m       map[int64]*producerEntry
	aborted []abortedTxn // by LastOffset
	// open maps the producers with an open transaction to its first
	// offset, so the last stable offset costs O(open transactions).
	open map[int64]int64
}

func newProducers() *producers {
	return &producers{m: map[int64]*producerEntry{}, open: map[int64]int64{}}
}

// check validates h against the producer state as Kafka's
// ProducerAppendInfo does. It returns the cached batch when h duplicates one
// of the producer's last five batches, or an *Error: INVALID_PRODUCER_EPOCH
// for an epoch below the producer's, OUT_OF_ORDER_SEQUENCE_NUMBER for a
// sequence that does not follow the last one (or a new epoch not starting
// at 0), INVALID_TXN_STATE for a non-transactional batch inside an open
// transaction.
func (p *producers) check(h BatchHeader) (*batchMeta, error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	e := p.m[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	if h.ProducerEpoch < e.Epoch {
		return nil, errorf(kerr.InvalidProducerEpoch, "producer %d epoch %d is older than its current epoch %d", h.ProducerID, h.ProducerEpoch, e.Epoch)
	}
	if h.Control() {
		return nil, nil
	}
	if h.ProducerEpoch == e.Epoch {
		first, last := h.BaseSequence, h.LastSequence()
		for i := range e.Batches {
			if b := &e.Batches[i]; b.FirstSeq == first && b.LastSeq == last {
				return b, nil
			}
		}
		ls := e.lastSeq()
		// With no batch kept (ls == -1) only sequence 0 is in order.
		if inSeq := first == ls+1 || (first == 0 && ls == math.MaxInt32); !inSeq {
			return nil, errorf(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: sequence %d does not follow the last sequence %d", h.ProducerID, h.ProducerEpoch, first, ls)
		}
	} else if h.BaseSequence != 0 {
		return nil, errorf(kerr.OutOfOrderSequenceNumber, "producer %d: new epoch %d must start at sequence 0, got %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	if !h.Transactional() && e.TxnFirstOffset >= 0 {
		return nil, errorf(kerr.InvalidTxnState, "producer %d has a transaction open since offset %d; a non-transactional batch is not allowed", h.ProducerID, e.TxnFirstOffset)
	}
	return nil, nil
}

// apply records the batch h appended at [base, base+count) in the state.
// ctrl is the control record type of a control batch (-1 if unknown).
func (p *producers) apply(h BatchHeader, base int64, maxTs int64, ctrl int, nowMs int64, fut *stream.AppendFuture) {
	if h.ProducerID < 0 {
		return
	}
	e := p.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{Epoch: h.ProducerEpoch, TxnFirstOffset: -1}
		p.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.Epoch {
		e.Epoch = h.ProducerEpoch
		e.Batches = e.Batches[:0]
	}
	e.LastAppendMs = nowMs
	last := base + h.OffsetCount() - 1
	if h.Control() {
		if e.TxnFirstOffset >= 0 && ctrl == ControlAbort {
			p.aborted = append(p.aborted, abortedTxn{ProducerID: h.ProducerID, FirstOffset: e.TxnFirstOffset, LastOffset: last})
		}
		e.TxnFirstOffset = -1
		delete(p.open, h.ProducerID)
		return
	}
	if h.Transactional() && e.TxnFirstOffset < 0 {
		e.TxnFirstOffset = base
		p.open[h.ProducerID] = base
	}
	if h.BaseSequence < 0 {
		return
	}
	if len(e.Batches) == maxCachedBatches {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:maxCachedBatches-1]
	}
	e.Batches = append(e.Batches, batchMeta{
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(),
		FirstOffset: base, LastOffset: last, Timestamp: maxTs, fut: fut,
	})
}

// firstUnstable returns the first offset of the earliest open transaction,
// or -1 when none is open.
func (p *producers) firstUnstable() int64 {
	first := int64(-1)
	for _, off := range p.open {
		if first < 0 || off < first {
			first = off
		}
	}
	return first
}

// abortedIn returns the aborted transactions that overlap [from, to).
func (p *producers) abortedIn(from, to int64) []AbortedTransaction {
	var out []AbortedTransaction
	for _, a := range p.aborted {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return out
}

// expire drops producers idle since before cutoffMs with no open
// transaction, and aborted transactions that end below logStart.
func (p *producers) expire(cutoffMs, logStart int64) {
	for id, e := range p.m {
		if e.LastAppendMs < cutoffMs && e.TxnFirstOffset < 0 {
			delete(p.m, id)
		}
	}
	i := 0
	for i < len(p.aborted) && p.aborted[i].LastOffset < logStart {
		i++
	}
	p.aborted = p.aborted[i:]
}

// clone returns a deep copy without in-flight futures, for a checkpoint.
func (p *producers) clone() *producers {
	c := &producers{m: make(map[int64]*producerEntry, len(p.m)), aborted: append([]abortedTxn(nil), p.aborted...), open: maps.Clone(p.open)}
	for id, e := range p.m {
		ce := *e
		ce.Batches = make([]batchMeta, len(e.Batches))
		for i, b := range e.Batches {
			b.fut = nil
			ce.Batches[i] = b
		}
		c.m[id] = &ce
	}
	return c
}
