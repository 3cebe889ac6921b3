package sharedlog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stratastream/strata/stream"
)

func sampleSnapshot() *snapshot {
	p := newProducers()
	p.m[7] = &producerEntry{Epoch: 2, TxnFirstOffset: -1, LastAppendMs: 99, Batches: []batchMeta{{FirstSeq: 0, LastSeq: 4, FirstOffset: 10, LastOffset: 14, Timestamp: 5}}}
	p.m[9] = &producerEntry{Epoch: 0, TxnFirstOffset: 20, LastAppendMs: 1}
	p.open[9] = 20
	p.aborted = []abortedTxn{{ProducerID: 3, FirstOffset: 1, LastOffset: 2}}
	x := newOffsetIndex(100)
	x.add(0, 3, 150, 1000)
	x.add(3, 2, 150, 900)
	return &snapshot{Next: 5, Epochs: epochHistory{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 3}}, Index: *x, Producers: p}
}

func TestCheckpointRoundTrip(t *testing.T) {
	s := sampleSnapshot()
	body := encodeSnapshot(s)
	parts := splitCheckpoint(42, body, metaPartHeader+7)
	var batches []stream.Batch
	batches = append(batches, stream.Batch{BaseOffset: 0, Count: 1, Payload: encodeEpochRecord(EpochEntry{Epoch: 1, StartOffset: 0})})
	for i, p := range parts {
		batches = append(batches, stream.Batch{BaseOffset: int64(i + 1), Count: 1, Payload: p})
	}
	late := EpochEntry{Epoch: 9, StartOffset: 5}
	batches = append(batches, stream.Batch{BaseOffset: int64(len(parts) + 1), Count: 1, Payload: encodeEpochRecord(late)})
	// A newer checkpoint that never completed must be ignored.
	batches = append(batches, stream.Batch{BaseOffset: int64(len(parts) + 2), Count: 1, Payload: splitCheckpoint(43, body, metaPartHeader+7)[0]})
	scan, err := scanMeta("m", batches)
	if err != nil {
		t.Fatal(err)
	}
	if scan.firstPart != 1 || !reflect.DeepEqual(scan.epochsLate, []EpochEntry{late}) {
		t.Fatalf("scan: first part %d, late epochs %v", scan.firstPart, scan.epochsLate)
	}
	got, err := decodeSnapshot(scan.body, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
	}
}

// FuzzDecodeSnapshot: corrupt checkpoint bytes are ErrCorrupt, never a
// panic or a huge allocation.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(sampleSnapshot()))
	f.Add([]byte{checkpointVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeSnapshot(b, 100); err != nil && !errors.Is(err, stream.ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
	})
}
