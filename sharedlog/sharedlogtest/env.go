package sharedlogtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/stream"
)

// baseTime is the timestamp of the suite's first records (ms).
const baseTime = 1_750_000_000_000

// env is what a case runs with.
type env struct {
	t      conformance.T
	h      conformance.Harness
	ctx    context.Context
	prefix string

	mu      sync.Mutex
	crashed map[any]bool
	nowMs   atomic.Int64
}

// store opens a store (Harness.NewStore), closed when the case ends.
func (e *env) store() *stream.Store {
	e.t.Helper()
	s := e.h.NewStore(e.t)
	if s == nil {
		e.t.Fatalf("Harness.NewStore returned nil")
	}
	e.closeLater(s)
	return s
}

// A crashed store is closed too, once the case is over: its abandoned
// sessions would otherwise run on (a real crash ends them with its process).
func (e *env) closeLater(s *stream.Store) {
	e.t.Cleanup(func() { _ = s.Close() })
}

// second opens an independent store on s's namespace, or skips.
func (e *env) second(s *stream.Store) *stream.Store {
	e.t.Helper()
	if e.h.Second == nil {
		e.t.Skipf("Harness.Second is nil: the harness declares no second store")
	}
	s2 := e.h.Second(e.t, s)
	if s2 == nil {
		e.t.Fatalf("Harness.Second returned nil")
	}
	e.closeLater(s2)
	return s2
}

// crash drops s (Harness.Crash) and returns the new store, or skips when the
// harness cannot crash s without losing acked data by design.
func (e *env) crash(s *stream.Store) *stream.Store {
	e.t.Helper()
	if e.h.Crash == nil {
		e.t.Skipf("Harness.Crash is nil: the harness declares no crash hook")
	}
	if e.h.CrashKillsProcess && !s.Info().Durable {
		e.t.Skipf("driver %q declares Durable=false and the harness's Crash kills its process", s.Info().Driver)
	}
	e.mu.Lock()
	e.crashed[s] = true
	e.mu.Unlock()
	s2 := e.h.Crash(e.t, s)
	if s2 == nil {
		e.t.Fatalf("Harness.Crash returned nil")
	}
	e.closeLater(s2)
	return s2
}

// partition returns a partition name of this case.
func (e *env) partition(suffix string) string { return e.prefix + "/" + suffix }

// now is the suite's clock for logs opened by open (settable by cases).
func (e *env) now() time.Time {
	if ms := e.nowMs.Load(); ms != 0 {
		return time.UnixMilli(ms)
	}
	return time.Now()
}

// opts returns Options for epoch with the case clock and a long background
// interval (cases drive retention and checkpoints explicitly).
func (e *env) opts(epoch int32) sharedlog.Options {
	return sharedlog.Options{Epoch: epoch, Now: e.now, RetentionCheckInterval: time.Hour, CheckpointInterval: time.Hour}
}

// open opens partition on s, closed when the case ends; the partition's
// streams are then deleted (through s, unless s was crashed).
func (e *env) open(s *stream.Store, partition string, o sharedlog.Options) *sharedlog.Log {
	e.t.Helper()
	e.t.Cleanup(func() {
		e.mu.Lock()
		crashed := e.crashed[s]
		e.mu.Unlock()
		if !crashed {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = sharedlog.Delete(ctx, s, partition)
		}
	})
	l, err := sharedlog.Open(e.ctx, s, partition, o)
	if err != nil {
		e.t.Fatalf("open partition %q at epoch %d: %v", partition, o.Epoch, err)
	}
	// Closed even if crashed, once the case is over (see closeLater).
	e.t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendOK appends b (a copy) and fails the case on error.
func (e *env) appendOK(l *sharedlog.Log, b []byte) sharedlog.AppendResult {
	e.t.Helper()
	r, err := l.Append(e.ctx, Clone(b), sharedlog.AppendOptions{})
	if err != nil {
		e.t.Fatalf("append to %q at log end %d: %v", l.Name(), l.LogEndOffset(), err)
	}
	return r
}

// appendCode appends b (a copy) and fails the case unless it fails with
// want.
func (e *env) appendCode(l *sharedlog.Log, what string, b []byte, want *kerr.Error) {
	e.t.Helper()
	_, err := l.Append(e.ctx, Clone(b), sharedlog.AppendOptions{})
	e.wantCode(what, err, want)
}

// wantCode fails the case unless err carries the Kafka error want.
func (e *env) wantCode(what string, err error, want *kerr.Error) {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("%s: succeeded, want %s", what, want.Message)
	}
	if !errors.Is(err, want) || sharedlog.ErrorCode(err) != want.Code {
		e.t.Fatalf("%s: got %v (code %d), want %s (code %d)", what, err, sharedlog.ErrorCode(err), want.Message, want.Code)
	}
}

// readAll reads every batch from the log start to the high watermark.
func (e *env) readAll(l *sharedlog.Log) []readBatch {
	e.t.Helper()
	out, err := readFrom(e.ctx, l, l.LogStartOffset(), sharedlog.ReadOptions{})
	if err != nil {
		e.t.Fatalf("read %q: %v", l.Name(), err)
	}
	return out
}

// readBatch is a batch read back with its decoded header.
type readBatch struct {
	h sharedlog.BatchHeader
	b []byte
}

// readFrom reads page by page from offset until an empty read, checking
// each batch parses and the pages join up.
func readFrom(ctx context.Context, l *sharedlog.Log, offset int64, o sharedlog.ReadOptions) ([]readBatch, error) {
	var out []readBatch
	next := offset
	for {
		r, err := l.Read(ctx, next, o)
		if err != nil {
			return out, err
		}
		if len(r.Batches) == 0 {
			return out, nil
		}
		for _, b := range r.Batches {
			h, err := sharedlog.ParseBatch(b)
			if err != nil {
				return out, fmt.Errorf("batch read at offset %d does not parse: %w", next, err)
			}
			if len(out) > 0 {
				if prev := out[len(out)-1].h; h.BaseOffset != prev.BaseOffset+prev.OffsetCount() {
					return out, fmt.Errorf("batch at offset %d does not follow the batch at %d (%d offsets)", h.BaseOffset, prev.BaseOffset, prev.OffsetCount())
				}
			} else if h.BaseOffset > next || h.BaseOffset+h.OffsetCount() <= next {
				return out, fmt.Errorf("read at %d returned a first batch [%d, %d)", next, h.BaseOffset, h.BaseOffset+h.OffsetCount())
			}
			out = append(out, readBatch{h: h, b: b})
		}
		last := out[len(out)-1].h
		next = last.BaseOffset + last.OffsetCount()
	}
}

// sameRecords fails unless got is want with only the fields the log assigns
// (base offset, leader epoch, and the CRC-covered fields LogAppendTime
// rewrites) different.
func (e *env) sameRecords(what string, got, want []byte) {
	e.t.Helper()
	if len(got) != len(want) {
		e.t.Fatalf("%s: %d bytes read back, %d appended", what, len(got), len(want))
	}
	if string(got[16:]) != string(want[16:]) || string(got[8:12]) != string(want[8:12]) {
		e.t.Fatalf("%s: the batch read back differs from the one appended beyond the base offset and leader epoch", what)
	}
}

// plain builds n records at ts (1 ms apart) tagged tag, not idempotent.
func plain(tag string, n int, ts int64) []byte {
	return Build(BatchSpec{Records: n, Timestamp: ts, TimestampStep: 1, Tag: tag})
}

// idem builds n records of producer pid/epoch from seq.
func idem(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	return Build(BatchSpec{Records: n, Timestamp: ts, TimestampStep: 1, Tag: fmt.Sprintf("p%d-s%d", pid, seq), Idempotent: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
}
