package sharedlog_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// sumCheckStore wraps a Store so that every Append with a supplied payload
// checksum is checked against the payload's real one.
type sumCheckStore struct {
	stream.DriverStore
	mu       sync.Mutex
	supplied int
	wrong    []string
}

func (s *sumCheckStore) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	st, err := s.DriverStore.Open(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return &sumCheckStream{DriverStream: st, s: s}, nil
}

type sumCheckStream struct {
	stream.DriverStream
	s *sumCheckStore
}

func (h *sumCheckStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	if b.PayloadChecksumSet {
		h.s.mu.Lock()
		h.s.supplied++
		if got := stream.Checksum(b.Payload); got != b.PayloadChecksum {
			h.s.wrong = append(h.s.wrong, h.Name())
		}
		h.s.mu.Unlock()
	}
	return h.DriverStream.Append(ctx, b)
}

// TestAppendSuppliesPayloadChecksum: the payload checksum the log hands the
// stream (from the Kafka CRC and the stamped header, without a pass over
// the batch) is the batch's real CRC32C for franz-go's batches of every
// codec, transactional batches and control batches, with and without
// LogAppendTime (which changes bytes inside the Kafka CRC).
func TestAppendSuppliesPayloadChecksum(t *testing.T) {
	ctx := context.Background()
	batches := map[string][]byte{}
	for _, s := range sharedlogtest.FranzSamples() {
		batches["franz-"+s.Name] = s.Batch
	}
	batches["big"] = sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 64, ValueSize: 1000, Timestamp: 1700000000000})
	marker := sharedlogtest.Build(sharedlogtest.BatchSpec{Idempotent: true, Transactional: true, ProducerID: 4242, ProducerEpoch: 3, Marker: sharedlogtest.CommitMarker})
	for _, logAppendTime := range []bool{false, true} {
		for name, b := range batches {
			st := &sumCheckStore{DriverStore: memory.New(memory.Config{}).Driver()}
			l, err := sharedlog.Open(ctx, stream.NewStore(st), "p", sharedlog.Options{Epoch: 3, LogAppendTime: logAppendTime})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(ctx, sharedlogtest.Clone(b), sharedlog.AppendOptions{}); err != nil {
				t.Fatalf("LogAppendTime %v, %s: %v", logAppendTime, name, err)
			}
			n := 1
			if h, _ := sharedlog.ParseBatch(b); h.Transactional() {
				if _, err := l.Append(ctx, sharedlogtest.Clone(marker), sharedlog.AppendOptions{Origin: sharedlog.OriginCoordinator}); err != nil {
					t.Fatalf("LogAppendTime %v, %s: commit marker: %v", logAppendTime, name, err)
				}
				n++
			}
			// What was stored reads back as valid Kafka batches (the
			// stamped CRC is right too).
			stored := 0
			for off := int64(0); off < l.HighWatermark(); {
				r, err := l.Read(ctx, off, sharedlog.ReadOptions{})
				if err != nil || len(r.Batches) == 0 {
					t.Fatalf("LogAppendTime %v, %s: read at %d: %d batches, %v", logAppendTime, name, off, len(r.Batches), err)
				}
				for _, rb := range r.Batches {
					h, err := sharedlog.ParseBatch(rb)
					if err != nil {
						t.Fatalf("LogAppendTime %v, %s: stored batch at %d does not parse: %v", logAppendTime, name, off, err)
					}
					if h.LogAppendTime() != logAppendTime {
						t.Fatalf("LogAppendTime %v, %s: stored batch at %d has the attribute %v", logAppendTime, name, off, h.LogAppendTime())
					}
					off = h.BaseOffset + h.OffsetCount()
					stored++
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			st.mu.Lock()
			if stored != n || st.supplied < n || len(st.wrong) > 0 {
				t.Errorf("LogAppendTime %v, %s: %d batches stored, %d appends with a supplied checksum (want %d), %d wrong (%v)",
					logAppendTime, name, stored, st.supplied, n, len(st.wrong), st.wrong)
			}
			st.mu.Unlock()
		}
	}
}
