package sharedlog_test

import (
	"encoding/binary"
	"errors"
	"testing"

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

func TestParseBatchBadInput(t *testing.T) {
	for _, c := range sharedlogtest.BadInputs() {
		t.Run(c.Name, func(t *testing.T) {
			_, err := sharedlog.ParseBatch(c.Batch)
			if c.Name == "control-from-producer" {
				// Well-formed: the Log rejects it by origin, not the parser.
				if err != nil {
					t.Fatalf("control batch does not parse: %v", err)
				}
				return
			}
			if !errors.Is(err, c.Want) {
				t.Fatalf("got %v, want %s", err, c.Want.Message)
			}
			if sharedlog.ErrorCode(err) != c.Want.Code {
				t.Fatalf("ErrorCode %d, want %d", sharedlog.ErrorCode(err), c.Want.Code)
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
