package sharedlog_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
)

func TestParseFranzSamples(t *testing.T) {
	want := map[string]struct {
		codec      int
		idem, txn  bool
		minRecords int32
	}{
		"plain":              {sharedlog.CompressionNone, false, false, 10},
		"idempotent":         {sharedlog.CompressionNone, true, false, 10},
		"gzip":               {sharedlog.CompressionGzip, true, false, 50},
		"snappy":             {sharedlog.CompressionSnappy, true, false, 50},
		"lz4":                {sharedlog.CompressionLZ4, true, false, 50},
		"zstd":               {sharedlog.CompressionZstd, true, false, 50},
		"transactional":      {sharedlog.CompressionNone, true, true, 10},
		"transactional-zstd": {sharedlog.CompressionZstd, true, true, 30},
	}
	samples := sharedlogtest.FranzSamples()
	if len(samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(samples), len(want))
	}
	for _, s := range samples {
		h, err := sharedlog.ParseBatch(s.Batch)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		w := want[s.Name]
		if h.Compression() != w.codec || h.Idempotent() != w.idem || h.Transactional() != w.txn || h.NumRecords != w.minRecords {
			t.Errorf("%s: codec %d idempotent %v transactional %v records %d, want %+v", s.Name, h.Compression(), h.Idempotent(), h.Transactional(), h.NumRecords, w)
		}
		if w.idem && (h.ProducerID != 4242 || h.ProducerEpoch != 3 || h.BaseSequence != 0) {
			t.Errorf("%s: producer %d epoch %d seq %d", s.Name, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
	}
}

// badBatches are malformed inputs and the Kafka error each must give.
func badBatches() []struct {
	name string
	b    []byte
	want *kerr.Error
} {
	good := func() []byte { return sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 3, Timestamp: 1000}) }
	mut := func(f func(b []byte) []byte) []byte { return f(good()) }
	be := binary.BigEndian
	return []struct {
		name string
		b    []byte
		want *kerr.Error
	}{
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
		{"negative-count", mut(func(b []byte) []byte { be.PutUint32(b[57:], 0xffffffff); return sharedlogtest.FixCRC(b) }), kerr.InvalidRecord},
		{"count-2GiB", mut(func(b []byte) []byte { be.PutUint32(b[57:], 0x7fffffff); return sharedlogtest.FixCRC(b) }), kerr.InvalidRecord},
		{"count-mismatch", mut(func(b []byte) []byte { be.PutUint32(b[57:], 2); be.PutUint32(b[23:], 1); return sharedlogtest.FixCRC(b) }), kerr.CorruptMessage},
		{"delta-mismatch", mut(func(b []byte) []byte { be.PutUint32(b[23:], 5); return sharedlogtest.FixCRC(b) }), kerr.InvalidRecord},
		{"record-length-huge", mut(func(b []byte) []byte { b[61] = 0xfe; b[62] = 0xff; b[63] = 0xff; b[64] = 0xff; b[65] = 0x0f; return sharedlogtest.FixCRC(b) }), kerr.CorruptMessage},
		{"codec-7", mut(func(b []byte) []byte { b[22] |= 7; return sharedlogtest.FixCRC(b) }), kerr.UnsupportedCompressionType},
		{"bad-producer", mut(func(b []byte) []byte { return sharedlogtest.SetProducer(b, -5, 0, 0) }), kerr.InvalidRecord},
	}
}

func TestParseBatchBadInput(t *testing.T) {
	for _, c := range badBatches() {
		t.Run(c.name, func(t *testing.T) {
			_, err := sharedlog.ParseBatch(c.b)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want.Message)
			}
			if sharedlog.ErrorCode(err) != c.want.Code {
				t.Fatalf("ErrorCode %d, want %d", sharedlog.ErrorCode(err), c.want.Code)
			}
		})
	}
}

func TestParseBatch2GiBDoesNotAllocate(t *testing.T) {
	b := sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1})
	binary.BigEndian.PutUint32(b[8:], 0x7fffffff)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := sharedlog.ParseBatch(b); err == nil {
			t.Fatal("accepted")
		}
	})
	// The error value itself allocates a little; what the prefix claims
	// (2 GiB) is never allocated.
	if allocs > 8 {
		t.Fatalf("%v allocations rejecting a 2 GiB prefix", allocs)
	}
}
