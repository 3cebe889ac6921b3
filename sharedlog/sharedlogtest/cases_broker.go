package sharedlogtest

import (
	"context"
	"errors"
	"time"

	"github.com/stratastream/strata/sharedlog"
)

// brokerCases check the calls a broker's Fetch wait, DescribeProducers and
// DescribeLogDirs handlers make.
func brokerCases() []Case {
	return []Case{
		{Family: FamilyOffsets, Name: "wait-high-watermark", Doc: "WaitHighWatermark returns when an append makes the data durable, on its context's end, and on Close",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				done := make(chan error, 1)
				go func() { done <- l.WaitHighWatermark(e.ctx, 1) }()
				e.appendOK(l, plain("w", 1, baseTime))
				select {
				case err := <-done:
					if err != nil {
						e.t.Fatalf("WaitHighWatermark(1) after an append: %v", err)
					}
				case <-time.After(time.Minute):
					e.t.Fatalf("WaitHighWatermark(1) did not return after the append was acked")
				}
				ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
				err := l.WaitHighWatermark(ctx, 2)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					e.t.Fatalf("WaitHighWatermark(2) with no new data: %v, want the context's deadline", err)
				}
				go func() { done <- l.WaitHighWatermark(e.ctx, 2) }()
				must(e, l.Close())
				select {
				case err := <-done:
					if err == nil {
						e.t.Fatalf("WaitHighWatermark returned no error when the log closed")
					}
				case <-time.After(time.Minute):
					e.t.Fatalf("WaitHighWatermark did not return when the log closed")
				}
			}},
		{Family: FamilyIdempotence, Name: "describe-producers", Doc: "Producers lists each producer's epoch, last sequence and open transaction, also at a new owner",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				p := e.partition("p")
				a := e.open(s1, p, e.opts(1))
				e.appendOK(a, idem(60, 1, 0, 3, baseTime+5))
				e.appendOK(a, Build(BatchSpec{Records: 1, Timestamp: baseTime + 9, Transactional: true, ProducerID: 61, ProducerEpoch: 0, BaseSequence: 0}))
				want := []sharedlog.ProducerState{
					{ProducerID: 60, ProducerEpoch: 1, LastSequence: 2, LastTimestamp: baseTime + 7, CurrentTxnStartOffset: -1},
					{ProducerID: 61, ProducerEpoch: 0, LastSequence: 0, LastTimestamp: baseTime + 9, CurrentTxnStartOffset: 3},
				}
				for _, l := range []*sharedlog.Log{a, e.open(s2, p, e.opts(2))} {
					got := l.Producers()
					if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
						e.t.Fatalf("Producers() of %q at epoch %d: %+v, want %+v", l.Name(), l.Epoch(), got, want)
					}
				}
			}},
		{Family: FamilyRetention, Name: "size", Doc: "Size reports the bytes of retained batches, before and after a trim and at a new owner",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				o := e.opts(1)
				o.IndexIntervalBytes = 1
				l := e.open(s, p, o)
				var total int64
				for i := range 6 {
					b := Build(BatchSpec{Records: 2, ValueSize: 500, Timestamp: baseTime, Tag: string(rune('a' + i))})
					total += int64(len(b))
					e.appendOK(l, b)
				}
				if l.Size() != total {
					e.t.Fatalf("Size() %d, appended %d bytes", l.Size(), total)
				}
				if _, err := l.DeleteRecords(e.ctx, 4); err != nil {
					e.t.Fatalf("DeleteRecords(4): %v", err)
				}
				if want := total * 4 / 6; l.Size() != want {
					e.t.Fatalf("Size() %d after deleting 2 of 6 equal batches, want %d", l.Size(), want)
				}
				must(e, l.Close())
				if l2 := e.open(s, p, o); l2.Size() != total*4/6 {
					e.t.Fatalf("Size() %d at the next owner, want %d", l2.Size(), total*4/6)
				}
			}},
	}
}
