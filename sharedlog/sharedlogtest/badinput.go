package sharedlogtest

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
)

// BadInput is a malformed record batch and the Kafka error a broker answers
// it with.
type BadInput struct {
	// Name says what is wrong.
	Name string
	// Batch is the bad batch.
	Batch []byte
	// Want is the error it must give.
	Want *kerr.Error
}

// BadInputs returns the suite's malformed batches: truncations, bad CRC and
// magic, overflowing and negative lengths and counts, a 2 GiB length
// prefix, bad record framing, unknown codecs, two batches in one request, a
// control batch from a producer.
func BadInputs() []BadInput {
	good := func() []byte { return Build(BatchSpec{Records: 3, Timestamp: baseTime, Tag: "bad"}) }
	mut := func(f func(b []byte) []byte) []byte { return f(good()) }
	be := binary.BigEndian
	return []BadInput{
		{"empty", nil, kerr.CorruptMessage},
		{"short-header", good()[:40], kerr.CorruptMessage},
		{"truncated", mut(func(b []byte) []byte { return b[:len(b)-1] }), kerr.CorruptMessage},
		{"length-2GiB", mut(func(b []byte) []byte { be.PutUint32(b[8:], 0x7fffffff); return b }), kerr.CorruptMessage},
		{"length-negative", mut(func(b []byte) []byte { be.PutUint32(b[8:], 0xffffff00); return b }), kerr.CorruptMessage},
		{"length-below-header", mut(func(b []byte) []byte { be.PutUint32(b[8:], 10); return b }), kerr.CorruptMessage},
		{"trailing-byte", append(good(), 0), kerr.CorruptMessage},
		{"two-batches", append(good(), good()...), kerr.InvalidRecord},
		{"wrong-crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), kerr.CorruptMessage},
		{"magic-1", mut(func(b []byte) []byte { b[16] = 1; return b }), kerr.InvalidRecord},
		{"magic-7", mut(func(b []byte) []byte { b[16] = 7; return b }), kerr.CorruptMessage},
		{"negative-count", mut(func(b []byte) []byte { be.PutUint32(b[57:], 0xffffffff); return FixCRC(b) }), kerr.InvalidRecord},
		{"count-2G", mut(func(b []byte) []byte { be.PutUint32(b[57:], 0x7fffffff); return FixCRC(b) }), kerr.InvalidRecord},
		{"zero-records", mut(func(b []byte) []byte { be.PutUint32(b[57:], 0); return FixCRC(b) }), kerr.InvalidRecord},
		{"negative-delta", mut(func(b []byte) []byte { be.PutUint32(b[23:], 0xfffffffe); return FixCRC(b) }), kerr.InvalidRecord},
		{"delta-count-mismatch", mut(func(b []byte) []byte { be.PutUint32(b[23:], 5); return FixCRC(b) }), kerr.InvalidRecord},
		{"fewer-records-than-count", mut(func(b []byte) []byte { be.PutUint32(b[57:], 2); be.PutUint32(b[23:], 1); return FixCRC(b) }), kerr.CorruptMessage},
		{"record-length-overflow", mut(func(b []byte) []byte { copy(b[61:], []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}); return FixCRC(b) }), kerr.CorruptMessage},
		{"record-offset-delta", mut(func(b []byte) []byte { return FixCRC(setFirstOffsetDelta(b, 1)) }), kerr.InvalidRecord},
		{"codec-7", mut(func(b []byte) []byte { b[22] |= 7; return FixCRC(b) }), kerr.UnsupportedCompressionType},
		{"negative-producer-id", mut(func(b []byte) []byte { return SetProducer(b, -5, 0, 0) }), kerr.InvalidRecord},
		{"control-from-producer", Build(BatchSpec{Marker: CommitMarker, ProducerID: 9, ProducerEpoch: 0, Timestamp: baseTime}), kerr.InvalidRecord},
	}
}

// setFirstOffsetDelta rewrites the offset delta of the first record of an
// uncompressed batch built by Build (whose small deltas take one varint
// byte).
func setFirstOffsetDelta(b []byte, delta byte) []byte {
	p := 61
	_, n := binary.Varint(b[p:]) // record length
	p += n + 1                   // attributes
	_, n = binary.Varint(b[p:])  // timestamp delta
	p += n
	b[p] = delta << 1 // zig-zag varint of a small value
	return b
}
