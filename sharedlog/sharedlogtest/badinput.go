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
		{"gzip-garbage", mut(func(b []byte) []byte { b[22] |= 1; return FixCRC(b) }), kerr.CorruptMessage},
		{"lz4-garbage", mut(func(b []byte) []byte { b[22] |= 3; return FixCRC(b) }), kerr.CorruptMessage},
		{"zstd-garbage", mut(func(b []byte) []byte { b[22] |= 4; return FixCRC(b) }), kerr.CorruptMessage},
		{"snappy-garbage", mut(func(b []byte) []byte { b[22] |= 2; return FixCRC(b) }), kerr.CorruptMessage},
		{"compressed-count-mismatch", recount(sample("gzip"), 1), kerr.CorruptMessage},
		{"compressed-count-short", recount(sample("zstd"), -1), kerr.CorruptMessage},
		{"zstd-bomb", zstdBomb(), kerr.CorruptMessage},
	}
}

// sample returns a copy of the franz-go sample name.
func sample(name string) []byte {
	for _, s := range FranzSamples() {
		if s.Name == name {
			return s.Batch
		}
	}
	panic("sharedlogtest: no franz-go sample " + name)
}

// recount changes a batch's record count and last offset delta by d
// (keeping them consistent with each other, not with the records).
func recount(b []byte, d int32) []byte {
	be := binary.BigEndian
	be.PutUint32(b[57:], uint32(int32(be.Uint32(b[57:]))+d))
	be.PutUint32(b[23:], uint32(int32(be.Uint32(b[23:]))+d))
	return FixCRC(b)
}

// zstdBomb is a zstd batch whose frame header claims 1 GiB of records: a
// broker must refuse it from the header, before decompressing.
func zstdBomb() []byte {
	frame := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528) // zstd magic
	frame = append(frame, 0xE0)                                // single segment, 8-byte content size
	frame = binary.LittleEndian.AppendUint64(frame, 1<<30)
	frame = append(frame, 0x03, 0x00, 0x40, 0) // a last RLE block, never reached
	b := Build(BatchSpec{Records: 1, Timestamp: baseTime})
	b = append(b[:61], frame...)
	b[22] |= 4
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	return FixCRC(b)
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
