package sharedlogtest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Markers for BatchSpec.Marker.
const (
	// NoMarker builds an ordinary data batch.
	NoMarker = iota
	// CommitMarker builds a control batch committing a transaction.
	CommitMarker
	// AbortMarker builds a control batch aborting a transaction.
	AbortMarker
)

// BatchSpec describes a v2 record batch for Build.
type BatchSpec struct {
	// Records is the number of records (default 1; ignored for markers).
	Records int
	// ValueSize is each record's value size in bytes (default 16).
	ValueSize int
	// Timestamp is the first record's timestamp in ms; record i has
	// Timestamp + i*TimestampStep.
	Timestamp     int64
	TimestampStep int64
	// Tag seeds the record values, so batches of different tags differ.
	Tag string
	// Idempotent sets the producer fields below; otherwise they are -1.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Transactional sets the transactional attribute (implies Idempotent).
	Transactional bool
	// Marker builds a control batch (CommitMarker or AbortMarker) of one
	// control record for the producer.
	Marker int
}

// Build encodes spec as an uncompressed v2 record batch with kmsg, base
// offset 0 and a correct CRC32C.
func Build(spec BatchSpec) []byte {
	n := max(spec.Records, 1)
	vs := spec.ValueSize
	if vs == 0 {
		vs = 16
	}
	var recs []byte
	var attrs int16
	if spec.Marker != NoMarker {
		n = 1
		attrs |= 0x20 | 0x10
		typ := kmsg.ControlRecordKeyTypeCommit
		if spec.Marker == AbortMarker {
			typ = kmsg.ControlRecordKeyTypeAbort
		}
		key := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
		// The value of a marker: version int16, coordinator epoch int32.
		val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
		recs = appendRecord(recs, kmsg.Record{Key: key, Value: val})
	} else {
		for i := range n {
			val := make([]byte, vs)
			head := fmt.Sprintf("%s#%d:", spec.Tag, i)
			copy(val, head)
			for j := len(head); j < vs; j++ {
				val[j] = byte(i*31 + j)
			}
			recs = appendRecord(recs, kmsg.Record{
				TimestampDelta64: int64(i) * spec.TimestampStep,
				OffsetDelta:      int32(i),
				Key:              []byte(fmt.Sprintf("k%d", i)),
				Value:            val,
			})
		}
	}
	if spec.Transactional {
		attrs |= 0x10
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if spec.Idempotent || spec.Transactional || spec.Marker != NoMarker {
		pid, epoch, seq = spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence
		if spec.Marker != NoMarker {
			seq = -1
		}
	}
	maxTs := spec.Timestamp + int64(n-1)*spec.TimestampStep
	if spec.TimestampStep < 0 {
		maxTs = spec.Timestamp
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      attrs,
		LastOffsetDelta: int32(n - 1),
		FirstTimestamp:  spec.Timestamp,
		MaxTimestamp:    maxTs,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		FirstSequence:   seq,
		NumRecords:      int32(n),
		Records:         recs,
	}
	b.Length = int32(61 - 12 + len(recs))
	return FixCRC(b.AppendTo(nil))
}

func appendRecord(dst []byte, r kmsg.Record) []byte {
	body := r.AppendTo(nil) // with Length 0, one varint byte
	r.Length = int32(len(body) - 1)
	return r.AppendTo(dst)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FixCRC recomputes the CRC32C of a v2 batch in place (after a test edits a
// field inside it) and returns it.
func FixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// SetProducer rewrites the producer id, epoch and base sequence of a v2
// batch in place, fixing its CRC, and returns it.
func SetProducer(b []byte, pid int64, epoch int16, seq int32) []byte {
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	return FixCRC(b)
}

// Clone copies a batch (appends take ownership of theirs).
func Clone(b []byte) []byte { return append([]byte(nil), b...) }

// ProduceRequest is a Produce (acks -1, a 10 s timeout) of the record
// batch records to partition of topic.
func ProduceRequest(topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
