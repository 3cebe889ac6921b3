package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// randomFetch builds a Fetch response of version v with random topics and
// partitions, some of them with records (returned apart, as fetch does).
func randomFetch(rng *rand.Rand, v int16) (*kmsg.FetchResponse, []partRecords) {
	r := kmsg.NewPtrFetchResponse()
	r.SetVersion(v)
	r.ThrottleMillis, r.ErrorCode, r.SessionID = rng.Int32N(100), int16(rng.IntN(3)), rng.Int32()
	var rs []partRecords
	for t := range rng.IntN(4) {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fmt.Sprintf("topic-%d-%s", t, bytes.Repeat([]byte("x"), rng.IntN(200)))
		for p := range rng.IntN(5) {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(p * 3)
			rp.ErrorCode = int16(rng.IntN(2) * 6)
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
			rp.PreferredReadReplica = rng.Int32N(3) - 1
			if rng.IntN(3) == 0 {
				rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				for range rng.IntN(3) {
					rp.AbortedTransactions = append(rp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: rng.Int64(), FirstOffset: rng.Int64()})
				}
			}
			switch rng.IntN(4) {
			case 0:
				rp.RecordBatches = nil
			case 1:
				rp.RecordBatches = []byte{}
			case 2: // records in the response itself (not from fetch)
				rp.RecordBatches = bytes.Repeat([]byte{byte(p)}, 1+rng.IntN(300))
			case 3: // records from a log read
				rp.RecordBatches = []byte{}
				pr := partRecords{topic: rt.Topic, partition: rp.Partition}
				for range 1 + rng.IntN(4) {
					b := make([]byte, 1+rng.IntN(2000))
					for i := range b {
						b[i] = byte(rng.IntN(256))
					}
					pr.batches = append(pr.batches, b)
					pr.size += len(b)
				}
				rs = append(rs, pr)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, rs
}

// TestAppendFetchMatchesKmsg checks that appendFetch's segments are, byte
// for byte, what kmsg encodes for the same response with its records in
// RecordBatches, at every version the broker serves.
func TestAppendFetchMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	withRecords := 0
	for i := range 2000 {
		v := int16(4 + i%9)
		r, rs := randomFetch(rng, v)
		head := []byte{1, 2, 3, 4, 5}
		segs, ok := appendFetch(bytes.Clone(head), r, rs)
		if !ok {
			t.Fatalf("run %d v%d: appendFetch refused a response without tagged fields", i, v)
		}
		var got []byte
		for _, s := range segs {
			got = append(got, s...)
		}
		materialize(r, rs)
		want := r.AppendTo(bytes.Clone(head))
		if !bytes.Equal(got, want) {
			t.Fatalf("run %d v%d: appendFetch wrote %d bytes, kmsg %d; first difference at %d", i, v, len(got), len(want), firstDiff(got, want))
		}
		if len(rs) > 0 {
			withRecords++
			if len(segs) < 2*len(rs)+1 {
				t.Fatalf("run %d: %d segments for %d partitions with records: records copied", i, len(segs), len(rs))
			}
		}
	}
	if withRecords < 500 {
		t.Fatalf("only %d of 2000 responses had records from reads", withRecords)
	}
}

// TestAppendFetchRefuses checks that a response with a field appendFetch
// does not write is left to kmsg, and that records naming no partition of
// the response are refused rather than dropped.
func TestAppendFetchRefuses(t *testing.T) {
	r := kmsg.NewPtrFetchResponse()
	r.SetVersion(12)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.CurrentLeader.LeaderID = 3
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	if _, ok := appendFetch(nil, r, nil); ok {
		t.Fatal("appendFetch encoded a CurrentLeader tag it does not write")
	}
	r.Topics[0].Partitions[0].CurrentLeader.LeaderID = -1
	if _, ok := appendFetch(nil, r, nil); !ok {
		t.Fatal("appendFetch refused a plain response")
	}
	stray := []partRecords{{topic: "other", partition: 0, batches: [][]byte{{1}}, size: 1}}
	if _, ok := appendFetch(nil, r, stray); ok {
		t.Fatal("appendFetch accepted records of a partition the response does not hold")
	}
	r.SetVersion(13)
	if _, ok := appendFetch(nil, r, nil); ok {
		t.Fatal("appendFetch encoded v13, which it does not know")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
