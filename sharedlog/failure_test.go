package sharedlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// faults are injected into the data streams of a faultyStore: while fail
// is set appends fail with ErrUnavailable, while skew is set they report a
// base offset one higher than the stream gave, and with hold not nil they
// are acknowledged only once hold is closed.
type faults struct {
	fail, skew atomic.Bool
	hold       chan struct{}
}

type faultyStore struct {
	stream.DriverStore
	f *faults
}

func (s faultyStore) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := s.DriverStore.Open(ctx, name, o)
	if err != nil || !strings.HasSuffix(name, sharedlog.DataSuffix) {
		return st, err
	}
	return faultyStream{st, s.f}, nil
}

type faultyStream struct {
	stream.DriverStream
	f *faults
}

func (s faultyStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	if s.f.fail.Load() {
		return stream.FailedAppend(fmt.Errorf("%w: injected fault on %q", stream.ErrUnavailable, s.Name()))
	}
	f := s.DriverStream.Append(ctx, b)
	skew, hold := s.f.skew.Load(), s.f.hold
	if !skew && hold == nil {
		return f
	}
	out, complete := stream.NewAppendFuture()
	go func() {
		if hold != nil {
			<-hold
		}
		r, err := f.Result()
		if skew {
			r.BaseOffset++
		}
		complete(r, err)
	}()
	return out
}

// openFaulty opens partition "p" at epoch 1 on a fresh memory namespace
// behind f, closed when t ends, and returns it with its store.
func openFaulty(t *testing.T, f *faults, o sharedlog.Options) (*sharedlog.Log, *stream.Store) {
	t.Helper()
	store := stream.NewStore(faultyStore{memory.New(memory.Config{Namespace: fmt.Sprintf("%s-%d", t.Name(), nsSeq.Add(1))}).Driver(), f})
	o.Epoch = 1
	l, err := sharedlog.Open(context.Background(), store, "p", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, store
}

func idemBatch(seq int32) []byte {
	return sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 2, Timestamp: 1_750_000_000_000, Idempotent: true, ProducerID: 77, BaseSequence: seq})
}

// TestAppendFailureStopsTheLogUntilReopen: a failed append fails the log
// (KAFKA_STORAGE_ERROR) without moving the high watermark; reopening
// rebuilds the producer state from durable data, so the producer's retry of
// the failed batch is appended, not taken for a duplicate.
func TestAppendFailureStopsTheLogUntilReopen(t *testing.T) {
	ctx := context.Background()
	var f faults
	l, store := openFaulty(t, &f, sharedlog.Options{})
	if _, err := l.Append(ctx, idemBatch(0), sharedlog.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	f.fail.Store(true)
	_, err := l.Append(ctx, idemBatch(2), sharedlog.AppendOptions{})
	if sharedlog.ErrorCode(err) != kerr.KafkaStorageError.Code || !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("append during a backend fault: %v, want KAFKA_STORAGE_ERROR wrapping ErrUnavailable", err)
	}
	f.fail.Store(false)
	if _, err := l.Append(ctx, idemBatch(2), sharedlog.AppendOptions{}); err == nil {
		t.Fatal("the log took an append after a failed one; it must wait for a reopen")
	}
	if l.HighWatermark() != 2 {
		t.Fatalf("high watermark %d after the failure, want 2", l.HighWatermark())
	}
	_ = l.Close()
	l2, err := sharedlog.Open(ctx, store, "p", sharedlog.Options{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	r, err := l2.Append(ctx, idemBatch(2), sharedlog.AppendOptions{})
	if err != nil || r.Duplicate || r.BaseOffset != 2 {
		t.Fatalf("retry after reopen: %+v, %v; want a new append at offset 2", r, err)
	}
}

// TestAckAtUnexpectedOffsetFailsTheLog: an ack at another offset than the
// one stamped into the batch (another writer) fails the append and the log.
func TestAckAtUnexpectedOffsetFailsTheLog(t *testing.T) {
	ctx := context.Background()
	var f faults
	l, _ := openFaulty(t, &f, sharedlog.Options{})
	f.skew.Store(true)
	_, err := l.Append(ctx, idemBatch(0), sharedlog.AppendOptions{})
	if !errors.Is(err, stream.ErrCorrupt) || sharedlog.ErrorCode(err) != kerr.KafkaStorageError.Code {
		t.Fatalf("append acked at another offset: %v, want KAFKA_STORAGE_ERROR wrapping ErrCorrupt", err)
	}
	f.skew.Store(false)
	if _, err := l.Append(ctx, idemBatch(0), sharedlog.AppendOptions{}); err == nil {
		t.Fatal("the log took an append after an offset mismatch")
	}
}

// TestWaitHighWatermarkReturnsTheFailure: a Fetch waiting for data
// (WaitHighWatermark) learns of a failed append at once instead of waiting
// out its deadline.
func TestWaitHighWatermarkReturnsTheFailure(t *testing.T) {
	ctx := context.Background()
	var f faults
	l, _ := openFaulty(t, &f, sharedlog.Options{})
	if _, err := l.Append(ctx, idemBatch(0), sharedlog.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() { waited <- l.WaitHighWatermark(wctx, l.HighWatermark()+1) }()
	time.Sleep(200 * time.Millisecond) // let it block first (if it has not, it sees the failure at once)
	f.fail.Store(true)
	if _, err := l.Append(ctx, idemBatch(2), sharedlog.AppendOptions{}); err == nil {
		t.Fatal("append succeeded during a backend fault")
	}
	if err := <-waited; !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("WaitHighWatermark after a failed append: %v, want the failure (ErrUnavailable)", err)
	}
}

// TestMaxInflightHoldsAppends: with MaxInflight appends awaiting their
// acks, the next append waits for room; its ctx ending fails it with the
// ctx's error and no offset used; once acks come, appends go on.
func TestMaxInflightHoldsAppends(t *testing.T) {
	ctx := context.Background()
	f := faults{hold: make(chan struct{})}
	l, _ := openFaulty(t, &f, sharedlog.Options{MaxInflight: 2})
	batch := func() []byte {
		return sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 2, Timestamp: 1_750_000_000_000})
	}
	f1 := l.AppendAsync(ctx, batch(), sharedlog.AppendOptions{})
	f2 := l.AppendAsync(ctx, batch(), sharedlog.AppendOptions{})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := l.AppendAsync(short, batch(), sharedlog.AppendOptions{}).Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third append with 2 in flight and MaxInflight 2: %v, want it to wait and fail with its ctx", err)
	}
	admitted := make(chan *sharedlog.AppendFuture, 1)
	go func() { admitted <- l.AppendAsync(ctx, batch(), sharedlog.AppendOptions{}) }() // waits for room
	select {
	case <-admitted:
		t.Fatal("an append was admitted with MaxInflight appends unacknowledged")
	case <-time.After(50 * time.Millisecond):
	}
	close(f.hold)
	f4 := <-admitted
	for i, fut := range []*sharedlog.AppendFuture{f1, f2, f4} {
		r, err := fut.Wait(ctx)
		if err != nil || r.BaseOffset != int64(2*i) {
			t.Fatalf("append %d: %+v, %v; want base offset %d (the failed one used none)", i, r, err, 2*i)
		}
	}
}

// TestFuturesCompleteInCallOrder: an append the stream answers at once
// (here a failure) completes only after the earlier appends still awaiting
// their acks, as the stream's own futures do.
func TestFuturesCompleteInCallOrder(t *testing.T) {
	ctx := context.Background()
	f := faults{hold: make(chan struct{})}
	l, _ := openFaulty(t, &f, sharedlog.Options{})
	release := sync.OnceFunc(func() { close(f.hold) })
	defer release() // before the log's Close, which waits for the acks
	f1 := l.AppendAsync(ctx, idemBatch(0), sharedlog.AppendOptions{})
	f2 := l.AppendAsync(ctx, idemBatch(2), sharedlog.AppendOptions{})
	f.fail.Store(true)
	f3 := l.AppendAsync(ctx, idemBatch(4), sharedlog.AppendOptions{})
	select {
	case <-f3.Done():
		t.Fatal("the third append completed while the first two awaited their acks")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	for i, fut := range []*sharedlog.AppendFuture{f1, f2} {
		if r, err := fut.Wait(ctx); err != nil || r.BaseOffset != int64(2*i) {
			t.Fatalf("append %d: %+v, %v", i, r, err)
		}
	}
	if _, err := f3.Wait(ctx); !errors.Is(err, stream.ErrUnavailable) {
		t.Fatalf("third append: %v, want the injected ErrUnavailable", err)
	}
}
