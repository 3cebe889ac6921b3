package broker

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// partRecords are the record batches one partition of a Fetch response
// answers with, as the log's read returned them: slices of the log's own
// buffers, which the response writes to the socket from where they are
// (writev), never copying them into an encoded response first.
type partRecords struct {
	topic     string
	partition int32
	batches   [][]byte
	size      int // the batches' bytes
}

// recordsFor is how the encoders find each partition's records: rs are in
// the order of the partitions of the response that have records, so each
// partition takes the next of rs if it names it.
type recordsFor struct{ rs []partRecords }

func (r *recordsFor) next(topic string, partition int32) (partRecords, bool) {
	if len(r.rs) > 0 && r.rs[0].partition == partition && r.rs[0].topic == topic {
		p := r.rs[0]
		r.rs = r.rs[1:]
		return p, true
	}
	return partRecords{}, false
}

// appendFetch encodes the body of Fetch response r (v4 to v12) after dst,
// with each partition's records taken from rs, and returns the response
// as the segments to write: encoded fields in dst's new bytes, record
// batches as the log's slices. ok is false when r holds a field this
// encoder does not write (tagged fields, versions past 12): the caller
// then encodes it with kmsg (materialize). The bytes are those of
// r.AppendTo with the records in RecordBatches (fetchwire_test.go).
func appendFetch(dst []byte, r *kmsg.FetchResponse, rs []partRecords) (segs net.Buffers, ok bool) {
	v := r.Version
	if v < 4 || v > 12 || len(r.Brokers) > 0 || r.UnknownTags.Len() > 0 {
		return nil, false
	}
	flex := v >= 12
	// cuts are where record batches go between dst's bytes.
	type cut struct {
		at      int
		batches [][]byte
	}
	var cuts []cut
	recs := recordsFor{rs}
	dst = be32(dst, r.ThrottleMillis)
	if v >= 7 {
		dst = be16(dst, r.ErrorCode)
		dst = be32(dst, r.SessionID)
	}
	dst = arrayLen(dst, len(r.Topics), false, flex)
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.UnknownTags.Len() > 0 {
			return nil, false
		}
		if flex {
			dst = binary.AppendUvarint(dst, uint64(len(t.Topic))+1)
		} else {
			dst = be16(dst, int16(len(t.Topic)))
		}
		dst = append(dst, t.Topic...)
		dst = arrayLen(dst, len(t.Partitions), false, flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if !defaultTags(p) {
				return nil, false
			}
			dst = be32(dst, p.Partition)
			dst = be16(dst, p.ErrorCode)
			dst = be64(dst, p.HighWatermark)
			dst = be64(dst, p.LastStableOffset)
			if v >= 5 {
				dst = be64(dst, p.LogStartOffset)
			}
			dst = arrayLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil, flex)
			for _, a := range p.AbortedTransactions {
				if a.UnknownTags.Len() > 0 {
					return nil, false
				}
				dst = be64(dst, a.ProducerID)
				dst = be64(dst, a.FirstOffset)
				if flex {
					dst = append(dst, 0)
				}
			}
			if v >= 11 {
				dst = be32(dst, p.PreferredReadReplica)
			}
			if pr, has := recs.next(t.Topic, p.Partition); has {
				dst = arrayLen(dst, pr.size, false, flex)
				cuts = append(cuts, cut{len(dst), pr.batches})
			} else {
				dst = arrayLen(dst, len(p.RecordBatches), p.RecordBatches == nil, flex)
				dst = append(dst, p.RecordBatches...)
			}
			if flex {
				dst = append(dst, 0) // no tagged fields
			}
		}
		if flex {
			dst = append(dst, 0)
		}
	}
	if flex {
		dst = append(dst, 0)
	}
	if len(recs.rs) > 0 {
		return nil, false // records of a partition the response does not hold
	}
	from := 0
	for _, c := range cuts {
		segs = append(segs, dst[from:c.at])
		segs = append(segs, c.batches...)
		from = c.at
	}
	return append(segs, dst[from:]), true
}

// materialize puts each partition's records of rs into its RecordBatches
// (one copy), for kmsg's encoder.
func materialize(r *kmsg.FetchResponse, rs []partRecords) {
	recs := recordsFor{rs}
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if pr, has := recs.next(t.Topic, p.Partition); has {
				b := make([]byte, 0, pr.size)
				for _, bt := range pr.batches {
					b = append(b, bt...)
				}
				p.RecordBatches = b
			}
		}
	}
}

// defaultTags says whether p's tagged fields are all unset.
func defaultTags(p *kmsg.FetchResponseTopicPartition) bool {
	return p.UnknownTags.Len() == 0 &&
		p.DivergingEpoch.Epoch == -1 && p.DivergingEpoch.EndOffset == -1 && p.DivergingEpoch.UnknownTags.Len() == 0 &&
		p.CurrentLeader.LeaderID == -1 && p.CurrentLeader.LeaderEpoch == -1 && p.CurrentLeader.UnknownTags.Len() == 0 &&
		p.SnapshotID.EndOffset == -1 && p.SnapshotID.Epoch == -1 && p.SnapshotID.UnknownTags.Len() == 0
}

// arrayLen appends the length of an array or of bytes: a compact
// (uvarint n+1, 0 for null) length when flex, else int32 (-1 for null).
func arrayLen(dst []byte, n int, null, flex bool) []byte {
	switch {
	case flex && null:
		return append(dst, 0)
	case flex:
		return binary.AppendUvarint(dst, uint64(n)+1)
	case null:
		return be32(dst, -1)
	default:
		return be32(dst, int32(n))
	}
}

func be16(dst []byte, v int16) []byte { return binary.BigEndian.AppendUint16(dst, uint16(v)) }
func be32(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }
func be64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }
