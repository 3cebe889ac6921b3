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
	// An uncompressed batch's records are walked while its CRC is
	// computed, block by block, so the walk reads bytes the checksum has
	// just brought into the CPU cache instead of fetching the batch from
	// memory a second time.
	plain := h.Compression() == CompressionNone
	var crc uint32
	var walkErr error
	if plain {
		crc, walkErr = checksumAndWalk(b, h.NumRecords)
	} else {
		crc = stream.Checksum(b[offAttributes:])
	}
	if crc != h.CRC {
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
	if plain {
		return h, walkErr
	}
	if deep {
		recs, err := batchRecords(b, h, MaxDecompressedBytes)
		if err != nil {
			return h, err
		}
		if err := walkRecords(recs, h.NumRecords, nil); err != nil {
			return h, err
		}
	}
	return h, nil
}

// crcBlock is how far the checksum runs ahead of the record walk in
// checksumAndWalk: well inside the CPU's L2 cache.
const crcBlock = 32 << 10

// checksumAndWalk returns the CRC32C of b from its attributes on (the
// Kafka batch CRC) and the outcome of walking its want uncompressed
// records, computing the checksum a block ahead of the walk.
func checksumAndWalk(b []byte, want int32) (uint32, error) {
	crc := stream.Checksum(b[offAttributes:BatchHeaderSize])
	recs := b[BatchHeaderSize:]
	done := 0
	ahead := func(end int) {
		for done < end {
			n := min(crcBlock, len(recs)-done)
			crc = stream.UpdateChecksum(crc, recs[done:done+n])
			done += n
		}
	}
	err := walkRecordsAhead(recs, want, ahead, nil)
	return stream.UpdateChecksum(crc, recs[done:]), err
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
	return walkRecordsAhead(recs, want, nil, f)
}

// walkRecordsAhead is walkRecords calling ahead (if not nil) with the end
// of each record in recs before decoding it. With f nil it only validates,
// and decodes nothing it need not.
func walkRecordsAhead(recs []byte, want int32, ahead func(end int), f func(record) bool) error {
	var rec record
	recp := &rec
	if f == nil {
		recp = nil
	}
	c := cursor{b: recs}
	for i := int32(0); i < want; i++ {
		n := c.varint()
		if c.bad || n < 0 || n > int64(len(recs)-c.p) {
			return errorf(kerr.CorruptMessage, "record %d: length %d runs past the %d bytes left", i, n, len(recs)-c.p)
		}
		body := cursor{b: recs[c.p : c.p+int(n)]}
		c.p += int(n)
		if ahead != nil {
			ahead(c.p)
		}
		od, err := body.record(i, recp)
		if err != nil {
			return err
		}
		if od != i {
			return errorf(kerr.InvalidRecord, "record %d has offset delta %d (deltas must count up from 0)", i, od)
		}
		if f != nil && !f(rec) {
			return nil
		}
	}
	if c.p != len(recs) {
		return errorf(kerr.CorruptMessage, "%d bytes follow the last of %d records", len(recs)-c.p, want)
	}
	return nil
}

// cursor reads the fields of a record. A malformed field sets bad; the
// caller checks it after each field.
type cursor struct {
	b   []byte
	p   int
	bad bool
}

// varint reads a zig-zag varint of at most 10 bytes (as Kafka's
// ByteUtils.readVarlong). Written without calls, so that it inlines: the
// record walk reads several per record.
func (c *cursor) varint() int64 {
	var u uint64
	for s := uint(0); ; s += 7 {
		if c.p >= len(c.b) || s > 63 {
			c.bad = true
			return 0
		}
		x := c.b[c.p]
		c.p++
		u |= uint64(x&0x7f) << s
		if x < 0x80 {
			return int64(u>>1) ^ -int64(u&1)
		}
	}
}

// bytes reads a varint length and skips that many bytes (-1: a null); it
// returns where they start and the length.
func (c *cursor) bytes() (start, n int) {
	l := c.varint()
	if c.bad || l < -1 || l > int64(len(c.b)-c.p) {
		c.bad = true
		return 0, 0
	}
	start = c.p
	c.p += max(int(l), 0)
	return start, int(l)
}

// record checks the body of record i (the bytes after its length) and
// returns its offset delta; with rec not nil it also decodes it into rec.
func (c *cursor) record(i int32, rec *record) (int32, error) {
	bad := func(what string) (int32, error) {
		return 0, errorf(kerr.CorruptMessage, "record %d: malformed %s", i, what)
	}
	if len(c.b) == 0 {
		return bad("attributes")
	}
	c.p = 1
	ts := c.varint()
	if c.bad {
		return bad("timestamp delta")
	}
	od := c.varint()
	if c.bad || od < math.MinInt32 || od > math.MaxInt32 {
		return bad("offset delta")
	}
	kp, kn := c.bytes()
	if c.bad {
		return bad("key")
	}
	vp, vn := c.bytes()
	if c.bad {
		return bad("value")
	}
	nh := c.varint()
	if c.bad || nh < 0 || nh > int64(len(c.b)-c.p) {
		return bad("header count")
	}
	for range nh {
		if _, n := c.bytes(); c.bad || n < 0 {
			return bad("header key")
		}
		if c.bytes(); c.bad {
			return bad("header value")
		}
	}
	if c.p != len(c.b) {
		return 0, errorf(kerr.CorruptMessage, "record %d: %d bytes follow its last header", i, len(c.b)-c.p)
	}
	if rec != nil {
		*rec = record{Attributes: int8(c.b[0]), TimestampDelta: ts, OffsetDelta: int32(od),
			Key: sliceAt(c.b, kp, kn), Value: sliceAt(c.b, vp, vn), NumHeaders: int(nh)}
	}
	return int32(od), nil
}

// sliceAt is b[p:p+n] with its capacity cut, or nil for n == -1.
func sliceAt(b []byte, p, n int) []byte {
	if n < 0 {
		return nil
	}
	return b[p : p+n : p+n]
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
