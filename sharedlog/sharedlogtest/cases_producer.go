package sharedlogtest

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/stream"
)

func idempotenceCases() []Case {
	return []Case{
		{Family: FamilyIdempotence, Name: "duplicate-last-five", Doc: "a retry of any of the producer's last five batches gets its original offsets and appends nothing",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				var orig []sharedlog.AppendResult
				for i := range 6 {
					orig = append(orig, e.appendOK(l, idem(7, 0, int32(i*3), 3, baseTime)))
				}
				end := l.LogEndOffset()
				for i := 1; i < 6; i++ {
					r := e.appendOK(l, idem(7, 0, int32(i*3), 3, baseTime))
					if !r.Duplicate || r.BaseOffset != orig[i].BaseOffset || r.LastOffset != orig[i].LastOffset {
						e.t.Fatalf("retry of batch %d: %+v, want a duplicate at [%d, %d]", i, r, orig[i].BaseOffset, orig[i].LastOffset)
					}
				}
				if l.LogEndOffset() != end {
					e.t.Fatalf("duplicates moved the log end from %d to %d", end, l.LogEndOffset())
				}
				e.appendCode(l, "retry of the sixth-last batch", idem(7, 0, 0, 3, baseTime), kerr.OutOfOrderSequenceNumber)
			}},
		{Family: FamilyIdempotence, Name: "duplicate-in-flight", Doc: "a retry of a batch still in flight answers with its offsets once it is durable",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				f1 := l.AppendAsync(e.ctx, idem(8, 0, 0, 2, baseTime), sharedlog.AppendOptions{})
				f2 := l.AppendAsync(e.ctx, idem(8, 0, 0, 2, baseTime), sharedlog.AppendOptions{})
				r1, err1 := f1.Wait(e.ctx)
				r2, err2 := f2.Wait(e.ctx)
				if err1 != nil || err2 != nil {
					e.t.Fatalf("append and its retry: %v, %v", err1, err2)
				}
				if !r2.Duplicate || r2.BaseOffset != r1.BaseOffset || l.LogEndOffset() != 2 {
					e.t.Fatalf("retry in flight: %+v (original %+v), log end %d", r2, r1, l.LogEndOffset())
				}
			}},
		{Family: FamilyIdempotence, Name: "out-of-order", Doc: "a sequence gap or a sequence going back is OUT_OF_ORDER_SEQUENCE_NUMBER and the log is unchanged",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, idem(9, 0, 0, 5, baseTime))
				e.appendCode(l, "sequence 6 after 0..4", idem(9, 0, 6, 1, baseTime), kerr.OutOfOrderSequenceNumber)
				e.appendCode(l, "sequence 3 after 0..4", idem(9, 0, 3, 1, baseTime), kerr.OutOfOrderSequenceNumber)
				if l.LogEndOffset() != 5 {
					e.t.Fatalf("log end %d after rejected batches, want 5", l.LogEndOffset())
				}
				if r := e.appendOK(l, idem(9, 0, 5, 1, baseTime)); r.BaseOffset != 5 || r.Duplicate {
					e.t.Fatalf("in-order batch after rejections: %+v", r)
				}
			}},
		{Family: FamilyIdempotence, Name: "stale-producer-epoch", Doc: "a batch with an older producer epoch is INVALID_PRODUCER_EPOCH",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, idem(10, 0, 0, 1, baseTime))
				e.appendOK(l, idem(10, 1, 0, 1, baseTime))
				e.appendCode(l, "epoch 0 after epoch 1", idem(10, 0, 1, 1, baseTime), kerr.InvalidProducerEpoch)
			}},
		{Family: FamilyIdempotence, Name: "new-epoch-starts-at-zero", Doc: "a producer's new epoch must start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise); a new producer may start anywhere",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, idem(11, 0, 0, 2, baseTime))
				e.appendCode(l, "epoch 1 at sequence 2", idem(11, 1, 2, 1, baseTime), kerr.OutOfOrderSequenceNumber)
				e.appendOK(l, idem(11, 1, 0, 1, baseTime))
				e.appendOK(l, idem(12, 0, 40, 1, baseTime))
			}},
		{Family: FamilyIdempotence, Name: "sequence-wraps", Doc: "sequences wrap from MaxInt32 to 0",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, idem(13, 0, math.MaxInt32-1, 2, baseTime))
				e.appendOK(l, idem(13, 0, 0, 1, baseTime))
				e.appendCode(l, "sequence 5 after the wrap", idem(13, 0, 5, 1, baseTime), kerr.OutOfOrderSequenceNumber)
			}},
		{Family: FamilyIdempotence, Name: "producers-independent", Doc: "producers' sequences are checked independently and non-idempotent batches are never deduplicated",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, idem(20, 0, 0, 1, baseTime))
				e.appendOK(l, idem(21, 0, 0, 1, baseTime))
				e.appendOK(l, idem(20, 0, 1, 1, baseTime))
				p := plain("np", 1, baseTime)
				a, b := e.appendOK(l, p), e.appendOK(l, p)
				if a.Duplicate || b.Duplicate || b.BaseOffset != a.BaseOffset+1 {
					e.t.Fatalf("identical non-idempotent batches: %+v then %+v, want two appends", a, b)
				}
			}},
	}
}

func transactionCases() []Case {
	return []Case{
		{Family: FamilyTransactions, Name: "lso-and-markers", Doc: "an open transaction holds the last stable offset at its first offset until its marker; READ_COMMITTED reads stop there",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, plain("before", 2, baseTime))
				txn := Build(BatchSpec{Records: 3, Timestamp: baseTime, Transactional: true, ProducerID: 30, ProducerEpoch: 0, BaseSequence: 0, Tag: "txn"})
				e.appendOK(l, txn)
				e.appendOK(l, plain("after", 1, baseTime))
				if lso := l.LastStableOffset(); lso != 2 {
					e.t.Fatalf("last stable offset %d with a transaction open at 2, want 2", lso)
				}
				rc, err := readFrom(e.ctx, l, 0, sharedlog.ReadOptions{Isolation: sharedlog.ReadCommitted})
				if err != nil || len(rc) != 1 {
					e.t.Fatalf("READ_COMMITTED read: %d batches, %v; want only the batch before the transaction", len(rc), err)
				}
				lo, err := l.ListOffsets(e.ctx, sharedlog.LatestTimestamp, sharedlog.ReadCommitted)
				if err != nil || lo.Offset != 2 {
					e.t.Fatalf("ListOffsets latest READ_COMMITTED: %+v, %v; want 2", lo, err)
				}
				m := e.appendMarker(l, 30, 0, CommitMarker)
				if lso := l.LastStableOffset(); lso != m.LastOffset+1 {
					e.t.Fatalf("last stable offset %d after the commit marker at %d, want %d", lso, m.LastOffset, m.LastOffset+1)
				}
				all := e.readAll(l)
				if len(all) != 4 || !all[1].h.Transactional() || !all[3].h.Control() {
					e.t.Fatalf("log after commit: %d batches, want 4 with the transactional batch and the marker intact", len(all))
				}
			}},
		{Family: FamilyTransactions, Name: "aborted-listed", Doc: "READ_COMMITTED reads report aborted transactions with their first offsets",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, Build(BatchSpec{Records: 2, Timestamp: baseTime, Transactional: true, ProducerID: 31, ProducerEpoch: 2, BaseSequence: 0}))
				e.appendMarker(l, 31, 2, AbortMarker)
				r, err := l.Read(e.ctx, 0, sharedlog.ReadOptions{Isolation: sharedlog.ReadCommitted})
				if err != nil {
					e.t.Fatalf("READ_COMMITTED read: %v", err)
				}
				if len(r.AbortedTransactions) != 1 || r.AbortedTransactions[0] != (sharedlog.AbortedTransaction{ProducerID: 31, FirstOffset: 0}) {
					e.t.Fatalf("aborted transactions %+v, want producer 31 from offset 0", r.AbortedTransactions)
				}
				if len(r.Batches) != 2 {
					e.t.Fatalf("READ_COMMITTED read returned %d batches, want the aborted batch and its marker", len(r.Batches))
				}
			}},
		{Family: FamilyTransactions, Name: "non-transactional-in-open-txn", Doc: "a non-transactional batch from a producer with an open transaction is INVALID_TXN_STATE",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, Build(BatchSpec{Records: 1, Timestamp: baseTime, Transactional: true, ProducerID: 32, ProducerEpoch: 0, BaseSequence: 0}))
				e.appendCode(l, "non-transactional batch inside the transaction", idem(32, 0, 1, 1, baseTime), kerr.InvalidTxnState)
			}},
		{Family: FamilyTransactions, Name: "franz-transactional-commit", Doc: "a franz-go transactional batch and its commit marker: LSO moves past the marker; stale-epoch markers are INVALID_PRODUCER_EPOCH",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				var txn []byte
				for _, smp := range FranzSamples() {
					if smp.Name == "transactional" {
						txn = smp.Batch
					}
				}
				if txn == nil {
					e.t.Fatalf("no franz-go transactional sample")
				}
				h, _ := sharedlog.ParseBatch(txn)
				e.appendOK(l, txn)
				if l.LastStableOffset() != 0 {
					e.t.Fatalf("last stable offset %d with the transaction open, want 0", l.LastStableOffset())
				}
				stale := Build(BatchSpec{Marker: CommitMarker, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch - 1, Timestamp: baseTime})
				_, err := l.Append(e.ctx, stale, sharedlog.AppendOptions{Origin: sharedlog.OriginCoordinator})
				e.wantCode("marker with an older producer epoch", err, kerr.InvalidProducerEpoch)
				e.appendMarker(l, h.ProducerID, h.ProducerEpoch, CommitMarker)
				if l.LastStableOffset() != l.HighWatermark() {
					e.t.Fatalf("last stable offset %d after commit, high watermark %d", l.LastStableOffset(), l.HighWatermark())
				}
			}},
	}
}

func producerIDCases() []Case {
	return []Case{
		{Family: FamilyIdempotence, Name: "producer-id-allocation", Doc: "producer id blocks allocated concurrently from two stores never overlap",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				name := e.partition("producer-ids")
				e.t.Cleanup(func() { _ = s1.Delete(context.Background(), name) })
				type block struct{ first, n int64 }
				const perStore = 10
				results := make(chan block, 2*perStore)
				errs := make(chan error, 2)
				for _, s := range []*stream.Store{s1, s2} {
					go func() {
						for i := range perStore {
							n := 1 + i%7*100
							first, err := sharedlog.AllocateProducerIDs(e.ctx, s, name, n)
							if err != nil {
								errs <- err
								return
							}
							results <- block{first, int64(n)}
						}
						errs <- nil
					}()
				}
				for range 2 {
					if err := <-errs; err != nil {
						e.t.Fatalf("allocate producer ids: %v", err)
					}
				}
				close(results)
				var blocks []block
				for b := range results {
					blocks = append(blocks, b)
				}
				slices.SortFunc(blocks, func(a, b block) int { return cmp.Compare(a.first, b.first) })
				for i := 1; i < len(blocks); i++ {
					if blocks[i].first < blocks[i-1].first+blocks[i-1].n {
						e.t.Fatalf("producer id blocks overlap: [%d, +%d) and [%d, +%d)", blocks[i-1].first, blocks[i-1].n, blocks[i].first, blocks[i].n)
					}
				}
				if len(blocks) != 2*perStore {
					e.t.Fatalf("%d blocks, want %d", len(blocks), 2*perStore)
				}
			}},
	}
}
