package sharedlogtest

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/stream"
)

func takeoverCases() []Case {
	return []Case{
		{Family: FamilyTakeover, Name: "fences-old-owner", Doc: "a new owner with a higher epoch in another store sees every acked record; the old owner's appends fail NOT_LEADER_OR_FOLLOWER",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				p := e.partition("p")
				a := e.open(s1, p, e.opts(1))
				var acked []sharedlog.AppendResult
				for i := range 10 {
					acked = append(acked, e.appendOK(a, idem(40, 0, int32(i*2), 2, baseTime+int64(i))))
				}
				b := e.open(s2, p, e.opts(2))
				if b.HighWatermark() != 20 {
					e.t.Fatalf("new owner's high watermark %d, want 20", b.HighWatermark())
				}
				_, err := a.Append(e.ctx, idem(40, 0, 20, 1, baseTime), sharedlog.AppendOptions{})
				e.wantCode("old owner's append after the takeover", err, kerr.NotLeaderForPartition)
				got := e.readAll(b)
				for i, r := range acked {
					if got[i].h.BaseOffset != r.BaseOffset || got[i].h.LeaderEpoch != 1 {
						e.t.Fatalf("acked batch %d at %d: new owner has a batch at %d with leader epoch %d", i, r.BaseOffset, got[i].h.BaseOffset, got[i].h.LeaderEpoch)
					}
					e.sameRecords(fmt.Sprintf("acked batch %d", i), got[i].b, idem(40, 0, int32(i*2), 2, baseTime+int64(i)))
				}
				if r := e.appendOK(b, idem(40, 0, 20, 1, baseTime)); r.BaseOffset != 20 {
					e.t.Fatalf("the producer's next batch at the new owner got offset %d, want 20", r.BaseOffset)
				}
				if _, end := b.OffsetForLeaderEpoch(1); end != 20 {
					e.t.Fatalf("OffsetForLeaderEpoch(1) at the new owner: end %d, want 20", end)
				}
			}},
		{Family: FamilyTakeover, Name: "idempotent-retry", Doc: "a producer's retry of a batch acked by the old owner is a duplicate at the new owner, with its original offsets",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				p := e.partition("p")
				a := e.open(s1, p, e.opts(1))
				var orig []sharedlog.AppendResult
				for i := range 5 {
					orig = append(orig, e.appendOK(a, idem(41, 2, int32(i), 1, baseTime)))
				}
				b := e.open(s2, p, e.opts(2))
				for i := range 5 {
					r := e.appendOK(b, idem(41, 2, int32(i), 1, baseTime))
					if !r.Duplicate || r.BaseOffset != orig[i].BaseOffset {
						e.t.Fatalf("retry of batch %d at the new owner: %+v, want a duplicate at %d", i, r, orig[i].BaseOffset)
					}
				}
				e.appendCode(b, "a gap in the producer's sequence at the new owner", idem(41, 2, 9, 1, baseTime), kerr.OutOfOrderSequenceNumber)
				e.appendCode(b, "an older producer epoch at the new owner", idem(41, 1, 0, 1, baseTime), kerr.InvalidProducerEpoch)
			}},
		{Family: FamilyTakeover, Name: "mid-pipeline", Doc: "a takeover while the old owner has appends in flight: every append it saw acked is in the new owner's log at its offset",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				p := e.partition("p")
				a := e.open(s1, p, e.opts(1))
				const n = 300
				futs := make([]*sharedlog.AppendFuture, n)
				batches := make([][]byte, n)
				var b *sharedlog.Log
				var wg sync.WaitGroup
				for i := range n {
					batches[i] = idem(42, 0, int32(i), 1, baseTime+int64(i))
					futs[i] = a.AppendAsync(e.ctx, Clone(batches[i]), sharedlog.AppendOptions{})
					if i == n/3 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							l, err := sharedlog.Open(e.ctx, s2, p, e.opts(2))
							if err == nil {
								b = l
							} else {
								e.t.Errorf("new owner open: %v", err)
							}
						}()
					}
				}
				wg.Wait()
				if b == nil {
					e.t.Fatalf("new owner did not open")
				}
				e.t.Cleanup(func() { _ = b.Close() })
				ackedN := 0
				var lastErr error
				for i, f := range futs {
					r, err := f.Wait(e.ctx)
					if err != nil {
						lastErr = err
						continue
					}
					if lastErr != nil {
						e.t.Fatalf("append %d acked after an earlier append failed (%v)", i, lastErr)
					}
					if r.BaseOffset != int64(i) {
						e.t.Fatalf("append %d acked at %d, want %d", i, r.BaseOffset, i)
					}
					ackedN++
				}
				if lastErr != nil && sharedlog.ErrorCode(lastErr) != kerr.NotLeaderForPartition.Code {
					e.t.Fatalf("old owner's appends failed with %v, want NOT_LEADER_OR_FOLLOWER", lastErr)
				}
				got := e.readAll(b)
				if len(got) < ackedN {
					e.t.Fatalf("new owner holds %d batches, the old owner saw %d acked", len(got), ackedN)
				}
				for i := range ackedN {
					e.sameRecords(fmt.Sprintf("acked batch %d", i), got[i].b, batches[i])
				}
				next := int32(len(got))
				if r := e.appendOK(b, idem(42, 0, next, 1, baseTime)); r.BaseOffset != int64(len(got)) {
					e.t.Fatalf("producer's next batch at the new owner: offset %d, want %d", r.BaseOffset, len(got))
				}
				e.t.Logf("old owner had %d of %d appends acked before the takeover", ackedN, n)
			}},
		{Family: FamilyTakeover, Name: "stale-epoch-open", Doc: "opening with an epoch below the partition's is FENCED_LEADER_EPOCH",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				l := e.open(s, p, e.opts(3))
				must(e, l.Close())
				_, err := sharedlog.Open(e.ctx, s, p, e.opts(2))
				e.wantCode("open at epoch 2 after epoch 3", err, kerr.FencedLeaderEpoch)
			}},
		{Family: FamilyTakeover, Name: "bounded-replay", Doc: "a new owner loads the checkpoint and replays only the batches after it",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				p := e.partition("p")
				a := e.open(s1, p, e.opts(1))
				for i := range 50 {
					e.appendOK(a, idem(int64(100+i%7), 0, int32(i/7), 1, baseTime+int64(i)))
				}
				must(e, a.Checkpoint(e.ctx))
				for i := 50; i < 53; i++ {
					e.appendOK(a, idem(int64(100+i%7), 0, int32(i/7), 1, baseTime+int64(i)))
				}
				b := e.open(s2, p, e.opts(2))
				rs := b.Recovery()
				if rs.CheckpointNext != 50 || rs.ReplayedBatches != 3 || rs.Producers != 7 {
					e.t.Fatalf("recovery %+v: want checkpoint at 50, 3 batches replayed, 7 producers", rs)
				}
				for i := 53; i < 60; i++ {
					e.appendOK(b, idem(int64(100+i%7), 0, int32(i/7), 1, baseTime+int64(i)))
				}
				e.checkLookups(b, []lookup{{baseTime + 52, 52, baseTime + 52}, {baseTime + 10, 10, baseTime + 10}})
			}},
		{Family: FamilyTakeover, Name: "checkpoint-on-close", Doc: "a clean Close checkpoints, so the next owner replays nothing and keeps the producer state",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				a := e.open(s, p, e.opts(1))
				r := e.appendOK(a, idem(50, 0, 0, 3, baseTime))
				must(e, a.Close())
				b := e.open(s, p, e.opts(1))
				if rs := b.Recovery(); rs.ReplayedBatches != 0 || rs.CheckpointNext != 3 {
					e.t.Fatalf("recovery after a clean close: %+v, want nothing replayed", rs)
				}
				if d := e.appendOK(b, idem(50, 0, 0, 3, baseTime)); !d.Duplicate || d.BaseOffset != r.BaseOffset {
					e.t.Fatalf("retry after reopen: %+v, want a duplicate at %d", d, r.BaseOffset)
				}
			}},
		{Family: FamilyTakeover, Name: "crash-recovery", Doc: "after a crash (no Close) a same-epoch reopen recovers every acked batch and the producer state",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				a := e.open(s, p, e.opts(1))
				var acked []sharedlog.AppendResult
				for i := range 20 {
					acked = append(acked, e.appendOK(a, idem(51, 0, int32(i), 1, baseTime+int64(i))))
				}
				s2 := e.crash(s)
				b := e.open(s2, p, e.opts(1))
				if b.HighWatermark() != 20 {
					e.t.Fatalf("high watermark %d after crash recovery, want 20", b.HighWatermark())
				}
				if d := e.appendOK(b, idem(51, 0, 19, 1, baseTime+19)); !d.Duplicate || d.BaseOffset != acked[19].BaseOffset {
					e.t.Fatalf("retry of the last batch after the crash: %+v", d)
				}
				if r := e.appendOK(b, idem(51, 0, 20, 1, baseTime)); r.BaseOffset != 20 {
					e.t.Fatalf("next batch after the crash got offset %d", r.BaseOffset)
				}
			}},
		{Family: FamilyTakeover, Name: "transaction-across-takeover", Doc: "an open transaction stays open at the new owner (LSO held) until its marker",
			run: func(e *env) {
				s1 := e.store()
				s2 := e.second(s1)
				p := e.partition("p")
				a := e.open(s1, p, e.opts(1))
				e.appendOK(a, plain("x", 1, baseTime))
				e.appendOK(a, Build(BatchSpec{Records: 2, Timestamp: baseTime, Transactional: true, ProducerID: 52, ProducerEpoch: 0, BaseSequence: 0}))
				must(e, a.Checkpoint(e.ctx))
				b := e.open(s2, p, e.opts(2))
				if b.LastStableOffset() != 1 {
					e.t.Fatalf("new owner's last stable offset %d with a transaction open at 1, want 1", b.LastStableOffset())
				}
				e.appendMarker(b, 52, 0, AbortMarker)
				r, err := b.Read(e.ctx, 0, sharedlog.ReadOptions{Isolation: sharedlog.ReadCommitted})
				if err != nil || len(r.AbortedTransactions) != 1 || b.LastStableOffset() != b.HighWatermark() {
					e.t.Fatalf("after abort at the new owner: %+v, %v, LSO %d", r.AbortedTransactions, err, b.LastStableOffset())
				}
			}},
		{Family: FamilyTakeover, Name: "streams-layout", Doc: "a partition is two streams, NAME/data and NAME/meta; Delete removes both",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				l := e.open(s, p, e.opts(1))
				e.appendOK(l, plain("x", 1, baseTime))
				must(e, l.Close())
				names, err := s.List(e.ctx, p+"/")
				if err != nil || len(names) != 2 || names[0] != p+sharedlog.DataSuffix || names[1] != p+sharedlog.MetaSuffix {
					e.t.Fatalf("streams of partition %q: %v, %v", p, names, err)
				}
				must(e, sharedlog.Delete(e.ctx, s, p))
				if names, err := s.List(e.ctx, p+"/"); err != nil || len(names) != 0 {
					e.t.Fatalf("streams after Delete: %v, %v", names, err)
				}
				if _, err := s.Open(e.ctx, p+sharedlog.DataSuffix, stream.OpenOptions{Mode: stream.ModeReadOnly}); err == nil {
					e.t.Fatalf("the data stream opens after Delete")
				}
			}},
	}
}

func checkpointCases() []Case {
	return []Case{
		{Family: FamilyTakeover, Name: "checkpoint-multipart", Doc: "a checkpoint larger than a stream batch is written in parts and recovered whole",
			run: func(e *env) {
				s1 := e.store()
				p := e.partition("p")
				o := e.opts(1)
				o.MaxBatchBytes = 1024
				a := e.open(s1, p, o)
				const producers = 300
				for i := range producers {
					e.appendOK(a, idem(int64(5000+i), int16(i%3), 0, 1, baseTime+int64(i)))
				}
				must(e, a.Close())
				b := e.open(s1, p, o)
				if rs := b.Recovery(); rs.Producers != producers || rs.ReplayedBatches != 0 || rs.CheckpointNext != producers {
					e.t.Fatalf("recovery from a multi-part checkpoint: %+v, want %d producers and nothing replayed", rs, producers)
				}
				for i := range producers {
					if r := e.appendOK(b, idem(int64(5000+i), int16(i%3), 0, 1, baseTime+int64(i))); !r.Duplicate || r.BaseOffset != int64(i) {
						e.t.Fatalf("retry of producer %d's batch after recovery: %+v, want a duplicate at %d", 5000+i, r, i)
					}
				}
			}},
	}
}
