package plugin

import (
	"fmt"

	"github.com/stratastream/strata/stream"
	streamv1 "github.com/stratastream/strata/stream/plugin/proto/strata/stream/v1"
)

// maxMessageBytes bounds one gRPC message in either direction. Batches
// larger than a driver's MaxBatchBytes are refused by the driver; this is
// only the transport's own ceiling (the server's MaxRecvMsgSize), far above
// stream.DefaultMaxBatchBytes.
const maxMessageBytes = 256 << 20

// coalesceBytes is how many payload bytes the host packs into one append
// message (and the driver into one fetch chunk) when several batches are
// waiting. A batch larger than this travels alone.
const coalesceBytes = 256 << 10

// payloadChecksum is the CRC32C of b's payload for the wire: the one the
// caller supplied with the batch (stream.Batch.PayloadChecksum), else
// computed here. The driver verifies it either way (batchFromProto), so a
// wrong supplied checksum fails the append with stream.ErrCorrupt.
func payloadChecksum(b *stream.Batch) uint32 {
	if b.PayloadChecksumSet {
		return b.PayloadChecksum
	}
	return stream.Checksum(b.Payload)
}

// batchToProto converts b for the wire. crc is payloadChecksum(b).
// The payload is not copied.
func batchToProto(b *stream.Batch, crc uint32) *streamv1.Batch {
	pb := &streamv1.Batch{
		BaseOffset: b.BaseOffset,
		Count:      b.Count,
		Timestamp:  b.Timestamp,
		Payload:    b.Payload,
		Crc32C:     crc,
	}
	if len(b.Properties) > 0 {
		pb.Properties = make([]*streamv1.Property, 0, len(b.Properties))
		for k, v := range b.Properties {
			pb.Properties = append(pb.Properties, &streamv1.Property{Key: []byte(k), Value: []byte(v)})
		}
	}
	return pb
}

// batchFromProto converts a wire batch, verifying its CRC32C. A mismatch, or
// a property key that appears twice, is ErrCorrupt; where names the batch
// for the message. The payload is not copied. The verified checksum is not
// set in the result (the driver's append path, server.Append, sets it;
// Fetch returns batches without it).
func batchFromProto(pb *streamv1.Batch, where string) (stream.Batch, error) {
	b := stream.Batch{
		BaseOffset: pb.GetBaseOffset(),
		Count:      pb.GetCount(),
		Timestamp:  pb.GetTimestamp(),
		Payload:    pb.GetPayload(),
	}
	if got := stream.Checksum(b.Payload); got != pb.GetCrc32C() {
		return stream.Batch{}, fmt.Errorf("%w: %s: payload CRC32C %08x, message says %08x", stream.ErrCorrupt, where, got, pb.GetCrc32C())
	}
	if props := pb.GetProperties(); len(props) > 0 {
		b.Properties = make(map[string]string, len(props))
		for _, p := range props {
			k := string(p.GetKey())
			if _, dup := b.Properties[k]; dup {
				return stream.Batch{}, fmt.Errorf("%w: %s: property %q appears twice", stream.ErrCorrupt, where, k)
			}
			b.Properties[k] = string(p.GetValue())
		}
	}
	return b, nil
}

// fetchAssembler checks and collects the chunks of one Fetch answer on the
// host. It accepts only what the contract allows a driver to send: whole
// batches with a valid checksum and Count >= 1, the first overlapping start,
// each next one starting where the previous ended, none starting at or after
// end, none beyond the offsets the driver reports, and not far more bytes
// than asked. Anything else is ErrCorrupt: a misbehaving driver never
// produces wrong data on the host.
type fetchAssembler struct {
	name       string
	start, end int64
	limit      int // bytes the answer may hold before the last batch
	batches    []stream.Batch
	bytes      int
	next       int64 // end offset of the last accepted batch
	startOff   int64
	nextOff    int64
	chunks     int
}

func newFetchAssembler(name string, start, end int64, limit int) *fetchAssembler {
	return &fetchAssembler{name: name, start: start, end: end, limit: limit, next: start}
}

// add checks one chunk and appends its batches.
func (a *fetchAssembler) add(resp *streamv1.FetchResponse) error {
	a.chunks++
	so, no := resp.GetStartOffset(), resp.GetNextOffset()
	if so < 0 || no < so {
		return fmt.Errorf("%w: fetch of stream %q: driver reports offsets start %d next %d", stream.ErrCorrupt, a.name, so, no)
	}
	if a.chunks > 1 && (so < a.startOff || no < a.nextOff) {
		return fmt.Errorf("%w: fetch of stream %q: driver's offsets went backwards within one fetch (start %d->%d, next %d->%d)",
			stream.ErrCorrupt, a.name, a.startOff, so, a.nextOff, no)
	}
	a.startOff, a.nextOff = so, no
	for i, pb := range resp.GetBatches() {
		where := fmt.Sprintf("fetch of stream %q, chunk %d batch %d (offset %d)", a.name, a.chunks, i, pb.GetBaseOffset())
		if a.bytes > a.limit {
			return fmt.Errorf("%w: %s: driver sent more than the %d bytes asked for", stream.ErrCorrupt, where, a.limit)
		}
		b, err := batchFromProto(pb, where)
		if err != nil {
			return err
		}
		if b.Count == 0 {
			return fmt.Errorf("%w: %s: batch with count 0", stream.ErrCorrupt, where)
		}
		end := b.BaseOffset + int64(b.Count)
		if end < b.BaseOffset {
			return fmt.Errorf("%w: %s: offsets overflow", stream.ErrCorrupt, where)
		}
		if len(a.batches) == 0 {
			if b.BaseOffset > a.start || end <= a.start {
				return fmt.Errorf("%w: %s: first batch [%d,%d) does not cover the fetch start %d", stream.ErrCorrupt, where, b.BaseOffset, end, a.start)
			}
		} else if b.BaseOffset != a.next {
			return fmt.Errorf("%w: %s: batch starts at %d, previous batch ended at %d", stream.ErrCorrupt, where, b.BaseOffset, a.next)
		}
		if b.BaseOffset >= a.end {
			return fmt.Errorf("%w: %s: batch starts at or after the fetch end %d", stream.ErrCorrupt, where, a.end)
		}
		if end > no {
			return fmt.Errorf("%w: %s: batch ends at %d, beyond the next offset %d the driver reports", stream.ErrCorrupt, where, end, no)
		}
		a.batches = append(a.batches, b)
		a.bytes += b.Size()
		a.next = end
	}
	return nil
}

// finish checks the answer as a whole once the driver ended the call.
func (a *fetchAssembler) finish() ([]stream.Batch, error) {
	if a.chunks == 0 {
		return nil, fmt.Errorf("%w: fetch of stream %q: driver ended the call without an answer", stream.ErrCorrupt, a.name)
	}
	return a.batches, nil
}
