package sharedlogtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/sharedlog"
)

func badInputCases() []Case {
	var out []Case
	for _, bad := range BadInputs() {
		out = append(out, Case{
			Family: FamilyBadInput, Name: bad.Name,
			Doc: fmt.Sprintf("a batch with %s is rejected with %s and the log is unchanged", bad.Name, bad.Want.Message),
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				e.appendOK(l, plain("before", 2, baseTime))
				before := e.readAll(l)
				e.appendCode(l, "append "+bad.Name, bad.Batch, bad.Want)
				if l.LogEndOffset() != 2 || l.HighWatermark() != 2 {
					e.t.Fatalf("after a rejected batch the log end is %d and high watermark %d, want 2", l.LogEndOffset(), l.HighWatermark())
				}
				after := e.readAll(l)
				if len(after) != len(before) || !bytes.Equal(after[0].b, before[0].b) {
					e.t.Fatalf("a rejected batch changed the log: %d batches before, %d after", len(before), len(after))
				}
				r := e.appendOK(l, plain("after", 1, baseTime))
				if r.BaseOffset != 2 {
					e.t.Fatalf("the append after a rejected batch got offset %d, want 2", r.BaseOffset)
				}
			},
		})
	}
	out = append(out, Case{
		Family: FamilyBadInput, Name: "too-large",
		Doc: "a batch above Options.MaxBatchBytes is MESSAGE_TOO_LARGE",
		run: func(e *env) {
			s := e.store()
			o := e.opts(1)
			o.MaxBatchBytes = 4096
			l := e.open(s, e.partition("p"), o)
			e.appendCode(l, "append 8 KiB batch with a 4 KiB limit", Build(BatchSpec{Records: 4, ValueSize: 2048, Timestamp: baseTime}), kerr.MessageTooLarge)
			e.appendOK(l, Build(BatchSpec{Records: 1, ValueSize: 1024, Timestamp: baseTime}))
		},
	})
	return out
}

func appendCases() []Case {
	return []Case{
		{Family: FamilyAppend, Name: "offsets-assigned", Doc: "offsets follow record counts; base offset and leader epoch are rewritten, the CRC still holds",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(7))
				want := int64(0)
				for i, n := range []int{1, 5, 2, 10, 1} {
					r := e.appendOK(l, plain(fmt.Sprint(i), n, baseTime+int64(i)))
					if r.BaseOffset != want || r.LastOffset != want+int64(n)-1 {
						e.t.Fatalf("batch %d of %d records: offsets [%d, %d], want [%d, %d]", i, n, r.BaseOffset, r.LastOffset, want, want+int64(n)-1)
					}
					want += int64(n)
				}
				if l.HighWatermark() != want || l.LogEndOffset() != want {
					e.t.Fatalf("high watermark %d, log end %d, want %d", l.HighWatermark(), l.LogEndOffset(), want)
				}
				for _, rb := range e.readAll(l) {
					if rb.h.LeaderEpoch != 7 {
						e.t.Fatalf("batch at %d has leader epoch %d, want 7", rb.h.BaseOffset, rb.h.LeaderEpoch)
					}
				}
			}},
		{Family: FamilyAppend, Name: "pipelined", Doc: "many appends in flight complete in order with contiguous offsets and all read back",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				const n = 200
				futs := make([]*sharedlog.AppendFuture, n)
				for i := range n {
					futs[i] = l.AppendAsync(e.ctx, plain(fmt.Sprint(i), 1+i%4, baseTime+int64(i)), sharedlog.AppendOptions{})
				}
				next := int64(0)
				for i, f := range futs {
					r, err := f.Wait(e.ctx)
					if err != nil {
						e.t.Fatalf("pipelined append %d: %v", i, err)
					}
					if r.BaseOffset != next {
						e.t.Fatalf("pipelined append %d got offset %d, want %d", i, r.BaseOffset, next)
					}
					next = r.LastOffset + 1
				}
				if got := e.readAll(l); len(got) != n {
					e.t.Fatalf("read %d batches back, want %d", len(got), n)
				}
			}},
		{Family: FamilyAppend, Name: "franz-batches-intact", Doc: "batches produced by franz-go (none, gzip, snappy, lz4, zstd, transactional) are stored and returned byte for byte",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				samples := FranzSamples()
				for i, smp := range samples {
					// One producer id per sample, so their sequences are independent.
					b := SetProducerIDIfAny(smp.Batch, int64(1000+i))
					e.appendOK(l, b)
					if h, _ := sharedlog.ParseBatch(b); h.Transactional() {
						e.appendMarker(l, int64(1000+i), h.ProducerEpoch, CommitMarker)
					}
				}
				got := e.readAll(l)
				j := 0
				for i, smp := range samples {
					want := SetProducerIDIfAny(smp.Batch, int64(1000+i))
					e.sameRecords("franz-go sample "+smp.Name, got[j].b, want)
					j++
					if got[j-1].h.Transactional() {
						if !got[j].h.Control() {
							e.t.Fatalf("sample %s: the commit marker after it is not a control batch", smp.Name)
						}
						j++
					}
				}
			}},
		{Family: FamilyAppend, Name: "log-append-time", Doc: "with LogAppendTime the batch gets the append time and timestamp type, with a valid CRC",
			run: func(e *env) {
				s := e.store()
				e.nowMs.Store(baseTime + 5_000_000)
				o := e.opts(1)
				o.LogAppendTime = true
				l := e.open(s, e.partition("p"), o)
				r := e.appendOK(l, plain("lat", 3, baseTime))
				if r.LogAppendTime != baseTime+5_000_000 {
					e.t.Fatalf("append result LogAppendTime %d, want %d", r.LogAppendTime, baseTime+5_000_000)
				}
				rb := e.readAll(l)[0]
				if !rb.h.LogAppendTime() || rb.h.MaxTimestamp != baseTime+5_000_000 {
					e.t.Fatalf("stored batch: LogAppendTime attribute %v, max timestamp %d", rb.h.LogAppendTime(), rb.h.MaxTimestamp)
				}
				if crc := crc32.Checksum(rb.b[21:], crc32.MakeTable(crc32.Castagnoli)); crc != binary.BigEndian.Uint32(rb.b[17:]) {
					e.t.Fatalf("stored batch CRC does not match its content")
				}
			}},
		{Family: FamilyAppend, Name: "read-semantics", Doc: "reads return the whole batch holding the offset, honour maxBytes but return at least one batch, and reject offsets outside the log",
			run: func(e *env) {
				s := e.store()
				l := e.open(s, e.partition("p"), e.opts(1))
				for i := range 5 {
					e.appendOK(l, Build(BatchSpec{Records: 4, ValueSize: 1000, Timestamp: baseTime, Tag: fmt.Sprint(i)}))
				}
				r, err := l.Read(e.ctx, 6, sharedlog.ReadOptions{MaxBytes: 1})
				if err != nil {
					e.t.Fatalf("read at 6: %v", err)
				}
				if len(r.Batches) != 1 {
					e.t.Fatalf("read at 6 with maxBytes 1 returned %d batches, want 1", len(r.Batches))
				}
				if h, _ := sharedlog.ParseBatch(r.Batches[0]); h.BaseOffset != 4 {
					e.t.Fatalf("read at 6 returned the batch at %d, want the one at 4", h.BaseOffset)
				}
				if r.HighWatermark != 20 || r.LogStartOffset != 0 || r.LastStableOffset != 20 {
					e.t.Fatalf("read result watermarks hw %d start %d lso %d", r.HighWatermark, r.LogStartOffset, r.LastStableOffset)
				}
				r, err = l.Read(e.ctx, 20, sharedlog.ReadOptions{})
				if err != nil || len(r.Batches) != 0 {
					e.t.Fatalf("read at the high watermark: %d batches, %v; want none, no error", len(r.Batches), err)
				}
				_, err = l.Read(e.ctx, 21, sharedlog.ReadOptions{})
				e.wantCode("read past the log end", err, kerr.OffsetOutOfRange)
				_, err = l.Read(e.ctx, -1, sharedlog.ReadOptions{})
				e.wantCode("read at -1", err, kerr.OffsetOutOfRange)
			}},
	}
}

// SetProducerIDIfAny returns a copy of b with its producer id replaced by
// pid when it has one (CRC fixed).
func SetProducerIDIfAny(b []byte, pid int64) []byte {
	b = Clone(b)
	if int64(binary.BigEndian.Uint64(b[43:])) < 0 {
		return b
	}
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	return FixCRC(b)
}

// appendMarker appends a transaction marker as the coordinator would.
func (e *env) appendMarker(l *sharedlog.Log, pid int64, epoch int16, marker int) sharedlog.AppendResult {
	e.t.Helper()
	b := Build(BatchSpec{Marker: marker, ProducerID: pid, ProducerEpoch: epoch, Timestamp: baseTime})
	r, err := l.Append(e.ctx, b, sharedlog.AppendOptions{Origin: sharedlog.OriginCoordinator})
	if err != nil {
		e.t.Fatalf("append marker %d for producer %d: %v", marker, pid, err)
	}
	return r
}
