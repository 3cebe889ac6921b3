package sharedlogtest

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/sharedlog"
)

func offsetCases() []Case {
	return []Case{
		{Family: FamilyOffsets, Name: "list-offsets-special", Doc: "earliest, latest and max-timestamp lookups",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, plain("a", 2, baseTime))
				e.appendOK(l, plain("b", 3, baseTime+9000))
				e.appendOK(l, plain("c", 1, baseTime+10))
				check := func(ts, wantOff, wantTs int64) {
					e.t.Helper()
					o, err := l.ListOffsets(e.ctx, ts, sharedlog.ReadUncommitted)
					if err != nil || o.Offset != wantOff || o.Timestamp != wantTs {
						e.t.Fatalf("ListOffsets(%d): %+v, %v; want offset %d timestamp %d", ts, o, err, wantOff, wantTs)
					}
				}
				check(sharedlog.EarliestTimestamp, 0, -1)
				check(sharedlog.LatestTimestamp, 6, -1)
				check(sharedlog.MaxTimestamp, 4, baseTime+9002)
				_, err := l.ListOffsets(e.ctx, -7, sharedlog.ReadUncommitted)
				e.wantCode("ListOffsets(-7)", err, kerr.InvalidRequest)
			}},
		{Family: FamilyOffsets, Name: "timestamp-lookup", Doc: "offset-by-timestamp finds the first record at or after the time, through a sparse index, with out-of-order batch timestamps",
			run: func(e *env) {
				s := e.store()
				o := e.opts(1)
				o.IndexIntervalBytes = 300
				l := e.open(s, e.partition("p"), o)
				for i := range 10 {
					e.appendOK(l, Build(BatchSpec{Records: 4, Timestamp: baseTime + int64(i)*100, TimestampStep: 10, Tag: fmt.Sprint(i)}))
				}
				// A late batch with old timestamps, then one far ahead.
				e.appendOK(l, Build(BatchSpec{Records: 2, Timestamp: baseTime, TimestampStep: 1, Tag: "late"}))
				e.appendOK(l, Build(BatchSpec{Records: 2, Timestamp: baseTime + 50_000, TimestampStep: 1, Tag: "ahead"}))
				e.checkLookups(l, []lookup{
					{0, 0, baseTime},
					{baseTime, 0, baseTime},
					{baseTime + 320, 14, baseTime + 320},
					{baseTime + 325, 15, baseTime + 330},
					{baseTime + 931, 42, baseTime + 50_000},
					{baseTime + 50_001, 43, baseTime + 50_001},
					{baseTime + 50_002, -1, -1},
				})
			}},
		{Family: FamilyOffsets, Name: "timestamp-lookup-compressed", Doc: "a timestamp inside a compressed franz-go batch finds the exact record",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, plain("first", 3, baseTime-100_000))
				for _, smp := range FranzSamples() {
					if smp.Name != "zstd" {
						continue
					}
					h, _ := sharedlog.ParseBatch(smp.Batch)
					e.appendOK(l, smp.Batch)
					e.checkLookups(l, []lookup{{h.BaseTimestamp + 5, 3 + 5, h.BaseTimestamp + 5}, {h.MaxTimestamp, 3 + int64(h.LastOffsetDelta), h.MaxTimestamp}})
					return
				}
				e.t.Fatalf("no zstd franz-go sample")
			}},
		{Family: FamilyOffsets, Name: "offset-for-leader-epoch", Doc: "the leader-epoch history across owners answers OffsetForLeaderEpoch as Kafka does",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				l1 := e.open(s, p, e.opts(1))
				e.appendOK(l1, plain("e1", 3, baseTime))
				must(e, l1.Close())
				l3 := e.open(s, p, e.opts(3))
				e.appendOK(l3, plain("e3", 2, baseTime))
				must(e, l3.Close())
				l4 := e.open(s, p, e.opts(4)) // writes nothing
				must(e, l4.Close())
				l5 := e.open(s, p, e.opts(5))
				e.appendOK(l5, plain("e5", 1, baseTime))
				for _, c := range []struct {
					epoch, wantEpoch int32
					wantEnd          int64
				}{{0, 0, 0}, {1, 1, 3}, {2, 1, 3}, {3, 3, 5}, {4, 3, 5}, {5, 5, 6}, {6, -1, -1}} {
					ge, end := l5.OffsetForLeaderEpoch(c.epoch)
					if ge != c.wantEpoch || end != c.wantEnd {
						e.t.Fatalf("OffsetForLeaderEpoch(%d) = (%d, %d), want (%d, %d); history %+v", c.epoch, ge, end, c.wantEpoch, c.wantEnd, l5.LeaderEpochs())
					}
				}
				o, err := l5.ListOffsets(e.ctx, sharedlog.EarliestTimestamp, sharedlog.ReadUncommitted)
				if err != nil || o.LeaderEpoch != 1 {
					e.t.Fatalf("earliest offset's leader epoch: %+v, %v; want 1", o, err)
				}
			}},
	}
}

type lookup struct {
	ts, wantOff, wantTs int64
}

func (e *env) checkLookups(l *sharedlog.Log, ls []lookup) {
	e.t.Helper()
	for _, c := range ls {
		o, err := l.ListOffsets(e.ctx, c.ts, sharedlog.ReadUncommitted)
		if err != nil || o.Offset != c.wantOff || o.Timestamp != c.wantTs {
			e.t.Fatalf("ListOffsets(%d) on %q: %+v, %v; want offset %d timestamp %d", c.ts, l.Name(), o, err, c.wantOff, c.wantTs)
		}
	}
}

func must(e *env, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%v", err)
	}
}

func retentionCases() []Case {
	return []Case{
		{Family: FamilyRetention, Name: "delete-records", Doc: "DeleteRecords moves the log start durably; reads below it are OFFSET_OUT_OF_RANGE; -1 means the high watermark",
			run: func(e *env) {
				s := e.store()
				p := e.partition("p")
				l := e.open(s, p, e.opts(1))
				for i := range 10 {
					e.appendOK(l, plain(fmt.Sprint(i), 1, baseTime))
				}
				if lw, err := l.DeleteRecords(e.ctx, 4); err != nil || lw != 4 {
					e.t.Fatalf("DeleteRecords(4) = %d, %v", lw, err)
				}
				_, err := l.Read(e.ctx, 3, sharedlog.ReadOptions{})
				e.wantCode("read below the log start", err, kerr.OffsetOutOfRange)
				if lw, err := l.DeleteRecords(e.ctx, 2); err != nil || lw != 4 {
					e.t.Fatalf("DeleteRecords(2) after 4 = %d, %v; want 4 unchanged", lw, err)
				}
				_, err = l.DeleteRecords(e.ctx, 11)
				e.wantCode("DeleteRecords past the high watermark", err, kerr.OffsetOutOfRange)
				if got := e.readAll(l); len(got) != 6 || got[0].h.BaseOffset != 4 {
					e.t.Fatalf("after DeleteRecords(4): %d batches from %d", len(got), got[0].h.BaseOffset)
				}
				must(e, l.Close())
				l2 := e.open(s, p, e.opts(2))
				if l2.LogStartOffset() != 4 {
					e.t.Fatalf("log start %d after reopen, want 4", l2.LogStartOffset())
				}
				if lw, err := l2.DeleteRecords(e.ctx, -1); err != nil || lw != 10 {
					e.t.Fatalf("DeleteRecords(-1) = %d, %v; want 10", lw, err)
				}
				if got := e.readAll(l2); len(got) != 0 {
					e.t.Fatalf("%d batches after deleting everything", len(got))
				}
				if r := e.appendOK(l2, plain("new", 1, baseTime)); r.BaseOffset != 10 || r.LogStartOffset != 10 {
					e.t.Fatalf("append after deleting everything: %+v", r)
				}
			}},
		{Family: FamilyRetention, Name: "by-time", Doc: "time retention removes the batches whose max timestamp is older than the retention",
			run: func(e *env) {
				s := e.store()
				o := e.opts(1)
				o.RetentionTime = 5500 * time.Millisecond
				l := e.open(s, e.partition("p"), o)
				for i := range 10 {
					e.appendOK(l, plain(fmt.Sprint(i), 1, baseTime+int64(i)*1000))
				}
				e.nowMs.Store(baseTime + 10_000)
				must(e, l.ApplyRetention(e.ctx))
				if l.LogStartOffset() != 5 {
					e.t.Fatalf("log start %d after time retention, want 5", l.LogStartOffset())
				}
				o2, err := l.ListOffsets(e.ctx, sharedlog.EarliestTimestamp, sharedlog.ReadUncommitted)
				if err != nil || o2.Offset != 5 {
					e.t.Fatalf("earliest offset %+v, %v; want 5", o2, err)
				}
			}},
		{Family: FamilyRetention, Name: "by-size", Doc: "size retention removes the oldest batches while at least retention bytes remain",
			run: func(e *env) {
				s := e.store()
				o := e.opts(1)
				o.IndexIntervalBytes = 1
				l := e.open(s, e.partition("p"), o)
				var size int
				for i := range 10 {
					b := Build(BatchSpec{Records: 1, ValueSize: 1000, Timestamp: baseTime, Tag: fmt.Sprint(i)})
					size = len(b)
					e.appendOK(l, b)
				}
				o.RetentionBytes = int64(size)*3 + int64(size)/2
				must(e, l.Close())
				l = e.open(s, e.partition("p"), o)
				must(e, l.ApplyRetention(e.ctx))
				if l.LogStartOffset() != 6 {
					e.t.Fatalf("log start %d after keeping >= 3.5 batches of 10, want 6", l.LogStartOffset())
				}
			}},
		{Family: FamilyRetention, Name: "background", Doc: "the background work applies retention on its own, and Close stops it",
			run: func(e *env) {
				s := e.store()
				o := e.opts(1)
				o.RetentionTime = time.Hour
				o.RetentionCheckInterval = 10 * time.Millisecond
				l := e.open(s, e.partition("p"), o)
				e.appendOK(l, plain("old", 1, time.Now().Add(-2*time.Hour).UnixMilli()))
				e.appendOK(l, plain("new", 1, time.Now().UnixMilli()))
				deadline := time.Now().Add(2 * time.Minute)
				for l.LogStartOffset() != 1 {
					if time.Now().After(deadline) {
						e.t.Fatalf("background retention did not trim the expired batch (log start %d)", l.LogStartOffset())
					}
					time.Sleep(10 * time.Millisecond)
				}
				must(e, l.Close())
				if _, err := l.Append(e.ctx, plain("closed", 1, baseTime), sharedlog.AppendOptions{}); err == nil {
					e.t.Fatalf("append after Close succeeded")
				}
			}},
	}
}
