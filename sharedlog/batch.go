package sharedlog

import (
	"encoding/binary"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/stream"
)

// Layout of a Kafka record batch, magic v2 (KIP-98). Offsets are from the
// start of the batch; all integers are big-endian.
const (
	offBaseOffset      = 0  // int64, assigned by the log
	offBatchLength     = 8  // int32, bytes after this field
	offLeaderEpoch     = 12 // int32, assigned by the log, outside the CRC
	offMagic           = 16 // int8, 2
	offCRC             = 17 // uint32, CRC32C of bytes [21, end)
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offBaseTimestamp   = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offRecordCount     = 57 // int32

	// BatchHeaderSize is the size of a v2 record batch header: the bytes
	// before the first record.
	BatchHeaderSize = 61
	// lengthOverhead is the bytes of the header not counted by batchLength.
	lengthOverhead = offLeaderEpoch
)

// Attribute bits of a v2 batch.
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

// Compression codecs (attribute bits 0-2).
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLZ4    = 3
	CompressionZstd   = 4
)

// BatchHeader is the decoded header of a v2 record batch.
type BatchHeader struct {
	// BaseOffset is the batch's first offset (as sent; the log rewrites it).
	BaseOffset int64
	// Length is the total size of the batch in bytes (batchLength + 12).
	Length int
	// LeaderEpoch is the partition leader epoch field.
	LeaderEpoch int32
	// Magic is the format version (2).
	Magic int8
	// CRC is the stored CRC32C of the bytes from the attributes to the end.
	CRC uint32
	// Attributes holds compression, timestamp type, transactional and
	// control bits.
	Attributes int16
	// LastOffsetDelta is the offset of the last record relative to the
	// base offset.
	LastOffsetDelta int32
	// BaseTimestamp is the timestamp of the first record (ms).
	BaseTimestamp int64
	// MaxTimestamp is the largest record timestamp (ms), or the log append
	// time.
	MaxTimestamp int64
	// ProducerID is the idempotent producer id, -1 for none.
	ProducerID int64
	// ProducerEpoch is the producer's epoch, -1 for none.
	ProducerEpoch int16
	// BaseSequence is the sequence number of the first record, -1 for none.
	BaseSequence int32
	// NumRecords is the record count field.
	NumRecords int32
}

// Compression is the batch's codec (CompressionNone, CompressionGzip, ...).
func (h BatchHeader) Compression() int { return int(h.Attributes & attrCompressionMask) }

// Transactional reports the transactional attribute.
func (h BatchHeader) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports the control attribute (a transaction marker).
func (h BatchHeader) Control() bool { return h.Attributes&attrControl != 0 }

// LogAppendTime reports the timestamp-type attribute (LogAppendTime).
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Idempotent reports whether the batch carries a producer id.
func (h BatchHeader) Idempotent() bool { return h.ProducerID >= 0 }

// OffsetCount is the number of offsets the batch occupies: LastOffsetDelta+1.
func (h BatchHeader) OffsetCount() int64 { return int64(h.LastOffsetDelta) + 1 }

// LastSequence is the sequence number of the last record (with Kafka's
// wrap-around at MaxInt32), or -1 when the batch has no sequence.
func (h BatchHeader) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return addSequence(h.BaseSequence, h.LastOffsetDelta)
}

// addSequence adds delta to seq wrapping from MaxInt32 to 0, as Kafka does.
func addSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// readHeader decodes the fixed header of b without checking anything but
// its size; b must hold at least BatchHeaderSize bytes.
func readHeader(b []byte) BatchHeader {
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:      int64(be.Uint64(b[offBaseOffset:])),
		Length:          int(int32(be.Uint32(b[offBatchLength:]))) + lengthOverhead,
		LeaderEpoch:     int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             be.Uint32(b[offCRC:]),
		Attributes:      int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:      int32(be.Uint32(b[offRecordCount:])),
	}
}

// MaxDecompressedBytes bounds what the records of one compressed batch may
// decompress to; more is CORRUPT_MESSAGE (a decompression bomb).
const MaxDecompressedBytes = 64 << 20

// ParseBatch decodes and validates one v2 record batch that must fill b
// exactly (a Produce request carries one batch per partition). It checks the
// length prefix against len(b) before reading anything it claims (a 2 GiB
// prefix costs nothing), the magic, the CRC32C, the counts and every
// record's framing and offset delta, decompressing compressed batches (gzip,
// snappy raw or xerial-framed, lz4, zstd; at most MaxDecompressedBytes).
// Failures are *Error with the code a Kafka broker answers: CORRUPT_MESSAGE
// for framing, checksum and decompression faults, INVALID_RECORD for
// well-framed but invalid content, UNSUPPORTED_COMPRESSION_TYPE for an
// unknown codec.
func ParseBatch(b []byte) (BatchHeader, error) { return parseBatch(b, true) }

// parseBatch is ParseBatch; with deep false it does not decompress
// compressed batches to check their records.
func parseBatch(b []byte, deep bool) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, errorf(kerr.CorruptMessage, "record batch of %d bytes is shorter than the %d-byte v2 header", len(b), BatchHeaderSize)
	}
	length := int64(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
	if length < BatchHeaderSize-lengthOverhead {
		return BatchHeader{}, errorf(kerr.CorruptMessage, "record batch length %d is below the v2 minimum %d", length, BatchHeaderSize-lengthOverhead)
	}
	if total := length + lengthOverhead; total != int64(len(b)) {
		if total > int64(len(b)) {
			return BatchHeader{}, errorf(kerr.CorruptMessage, "record batch length %d claims %d bytes, only %d present (truncated)", length, total, len(b))
		}
		if rest := int64(len(b)) - total; rest >= lengthOverhead {
			return BatchHeader{}, errorf(kerr.InvalidRecord, "%d bytes follow the record batch: a produce request carries exactly one batch per partition", rest)
		}
		return BatchHeader{}, errorf(kerr.CorruptMessage, "%d stray bytes follow the record batch", int64(len(b))-total)
	}
	h := readHeader(b)
	switch {
	case h.Magic == 0 || h.Magic == 1:
		return h, errorf(kerr.InvalidRecord, "record batch magic %d: only magic v2 batches are accepted", h.Magic)
	case h.Magic != 2:
		return h, errorf(kerr.CorruptMessage, "record batch magic %d is not a known format", h.Magic)
	}
	if crc := stream.Checksum(b[offAttributes:]); crc != h.CRC {
		return h, errorf(kerr.CorruptMessage, "record batch CRC32C is %08x, computed %08x", h.CRC, crc)
	}
	if c := h.Compression(); c > CompressionZstd {
		return h, errorf(kerr.UnsupportedCompressionType, "record batch compression codec %d is unknown", c)
	}
	switch {
	case h.NumRecords <= 0:
		return h, errorf(kerr.InvalidRecord, "record batch has record count %d, want >= 1", h.NumRecords)
	case h.LastOffsetDelta < 0:
		return h, errorf(kerr.InvalidRecord, "record batch has last offset delta %d, want >= 0", h.LastOffsetDelta)
	case int64(h.NumRecords) != h.OffsetCount():
		return h, errorf(kerr.InvalidRecord, "record batch has %d records but last offset delta %d (want count = delta + 1)", h.NumRecords, h.LastOffsetDelta)
	case h.ProducerID < -1:
		return h, errorf(kerr.InvalidRecord, "record batch producer id %d is negative", h.ProducerID)
	case h.ProducerID >= 0 && h.ProducerEpoch < 0:
		return h, errorf(kerr.InvalidRecord, "record batch producer id %d with producer epoch %d", h.ProducerID, h.ProducerEpoch)
	case h.BaseSequence < -1:
		return h, errorf(kerr.InvalidRecord, "record batch base sequence %d is negative", h.BaseSequence)
	case h.ProducerID >= 0 && h.BaseSequence < 0 && !h.Control():
		return h, errorf(kerr.InvalidRecord, "idempotent record batch (producer id %d) has no base sequence", h.ProducerID)
	case h.Transactional() && h.ProducerID < 0:
		return h, errorf(kerr.InvalidRecord, "transactional record batch without a producer id")
	}
	if h.Compression() == CompressionNone || deep {
		recs, err := batchRecords(b, h, MaxDecompressedBytes)
		if err != nil {
			return h, err
		}
		if err := walkRecords(recs, h.NumRecords, func(record) bool { return true }); err != nil {
			return h, err
		}
	}
	return h, nil
}

// record is one record of an uncompressed (or decompressed) v2 batch. Its
// slices alias the batch bytes.
type record struct {
	// Attributes is the record's (unused) attributes byte.
	Attributes int8
	// TimestampDelta is the timestamp relative to the batch's base timestamp.
	TimestampDelta int64
	// OffsetDelta is the offset relative to the batch's base offset.
	OffsetDelta int32
	// Key is nil for a null key.
	Key []byte
	// Value is nil for a null value (a tombstone).
	Value []byte
	// NumHeaders is the number of record headers (not decoded).
	NumHeaders int
}

// walkRecords decodes want records from recs (the bytes after a batch
// header, uncompressed), calling f for each until f returns false. Framing
// faults (a length or varint running past the end, negative lengths, bytes
// left over) are CORRUPT_MESSAGE; an offset delta out of sequence is
// INVALID_RECORD. It never allocates from a length it reads.
func walkRecords(recs []byte, want int32, f func(record) bool) error {
	rd := recordReader{b: recs}
	for i := int32(0); i < want; i++ {
		n, ok := rd.varint()
		if !ok || n < 0 || n > int64(len(rd.b)-rd.pos) {
			return errorf(kerr.CorruptMessage, "record %d: length %d runs past the %d bytes left", i, n, len(rd.b)-rd.pos)
		}
		body := recordReader{b: rd.b[rd.pos : rd.pos+int(n)]}
		rd.pos += int(n)
		r, err := body.record(i)
		if err != nil {
			return err
		}
		if r.OffsetDelta != i {
			return errorf(kerr.InvalidRecord, "record %d has offset delta %d (deltas must count up from 0)", i, r.OffsetDelta)
		}
		if !f(r) {
			return nil
		}
	}
	if rd.pos != len(rd.b) {
		return errorf(kerr.CorruptMessage, "%d bytes follow the last of %d records", len(rd.b)-rd.pos, want)
	}
	return nil
}

type recordReader struct {
	b   []byte
	pos int
}

func (r *recordReader) varint() (int64, bool) {
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		return 0, false
	}
	r.pos += n
	return v, true
}

// bytes reads a varint length and that many bytes (-1: nil).
func (r *recordReader) bytes() ([]byte, bool) {
	n, ok := r.varint()
	if !ok || n < -1 || n > int64(len(r.b)-r.pos) {
		return nil, false
	}
	if n == -1 {
		return nil, true
	}
	p := r.b[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return p, true
}

func (r *recordReader) record(i int32) (record, error) {
	bad := func(what string) (record, error) {
		return record{}, errorf(kerr.CorruptMessage, "record %d: malformed %s", i, what)
	}
	var rec record
	if r.pos >= len(r.b) {
		return bad("attributes")
	}
	rec.Attributes = int8(r.b[r.pos])
	r.pos++
	var ok bool
	if rec.TimestampDelta, ok = r.varint(); !ok {
		return bad("timestamp delta")
	}
	od, ok := r.varint()
	if !ok || od < math.MinInt32 || od > math.MaxInt32 {
		return bad("offset delta")
	}
	rec.OffsetDelta = int32(od)
	if rec.Key, ok = r.bytes(); !ok {
		return bad("key")
	}
	if rec.Value, ok = r.bytes(); !ok {
		return bad("value")
	}
	nh, ok := r.varint()
	if !ok || nh < 0 || nh > int64(len(r.b)-r.pos) {
		return bad("header count")
	}
	for h := int64(0); h < nh; h++ {
		k, ok := r.bytes()
		if !ok || k == nil {
			return bad("header key")
		}
		if _, ok := r.bytes(); !ok {
			return bad("header value")
		}
	}
	rec.NumHeaders = int(nh)
	if r.pos != len(r.b) {
		return record{}, errorf(kerr.CorruptMessage, "record %d: %d bytes follow its last header", i, len(r.b)-r.pos)
	}
	return rec, nil
}

// stampBatch rewrites the fields the log assigns: the base offset and the
// partition leader epoch (both outside the CRC) and, when appendTime >= 0,
// the LogAppendTime attribute and max timestamp (inside the CRC, which it
// then updates from the change alone: a CRC32C of the changed bytes before
// and after, shifted over the rest). b's CRC must be valid (parseBatch
// checked it). It returns the stream.Checksum of the whole stamped batch,
// the stream payload checksum, without a pass over b: the CRC32C of the
// 21 bytes before the attributes combined with the Kafka CRC, which covers
// the attributes to the end in every v2 batch (compressed, transactional
// and control batches alike).
func stampBatch(b []byte, base int64, epoch int32, appendTime int64) uint32 {
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(base))
	be.PutUint32(b[offLeaderEpoch:], uint32(epoch))
	crc := be.Uint32(b[offCRC:])
	if appendTime >= 0 {
		changed := b[offAttributes:offProducerID] // attributes .. max timestamp
		before := stream.Checksum(changed)
		attrs := be.Uint16(b[offAttributes:]) | attrLogAppendTime
		be.PutUint16(b[offAttributes:], attrs)
		be.PutUint64(b[offMaxTimestamp:], uint64(appendTime))
		crc ^= stream.CombineChecksum(before^stream.Checksum(changed), 0, len(b)-offProducerID)
		be.PutUint32(b[offCRC:], crc)
	}
	return stream.CombineChecksum(stream.Checksum(b[:offAttributes]), crc, len(b)-offAttributes)
}

// Control record types (the key of a control batch's single record).
const (
	ControlAbort  = 0
	ControlCommit = 1
)

// controlType decodes the control record key of an uncompressed control
// batch: its type (ControlAbort or ControlCommit), or -1 when the batch
// holds no readable control record.
func controlType(b []byte, h BatchHeader) int {
	if !h.Control() || h.Compression() != CompressionNone || len(b) < BatchHeaderSize {
		return -1
	}
	typ := -1
	_ = walkRecords(b[BatchHeaderSize:], 1, func(r record) bool {
		if len(r.Key) >= 4 {
			typ = int(int16(binary.BigEndian.Uint16(r.Key[2:4])))
		}
		return false
	})
	return typ
}
