package broker

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is a Fetch v11 of session id at epoch, listing partitions
// ps (partition: fetch offset) of topic and forgetting forget, waiting at
// most 10 ms.
func sessionFetch(id, epoch int32, topic string, ps map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 10
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(ps) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		ids := make([]int32, 0, len(ps))
		for p := range ps {
			ids = append(ids, p)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, p := range ids {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, ps[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answered lists a response's partitions as "p:hwm:records" sorted, and
// says each one's record bytes.
func answered(resp *kmsg.FetchResponse) string {
	var out []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			s := fmt.Sprintf("%d:%d", rp.Partition, rp.HighWatermark)
			if len(rp.RecordBatches) > 0 {
				s += ":r"
			}
			if rp.ErrorCode != 0 {
				s += ":" + kerr.ErrorForCode(rp.ErrorCode).Error()
			}
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// produceTo produces one record to partition p of topic.
func produceTo(t *testing.T, cl *kgo.Client, topic string, p int32) {
	t.Helper()
	r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestFetchSessionIncremental: a full fetch at epoch 0 opens a session and
// answers every partition; incremental fetches then list only what
// changed and are answered only for partitions with records or new
// offsets; a forgotten partition is no longer answered; wrong epochs and
// unknown ids get the session errors; epoch -1 ends the session.
func TestFetchSessionIncremental(t *testing.T) {
	_, addr := memBrokerWith(t, nil)
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "s", 4, nil)
	for p := range int32(4) {
		produceTo(t, cl, "s", p)
	}
	c := dial(t, addr)
	corr := int32(0)
	send := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		corr++
		return sendFetch(t, c, corr, req)
	}
	expect := func(what string, resp *kmsg.FetchResponse, code int16, want string) {
		t.Helper()
		if resp.ErrorCode != code {
			t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(code))
		}
		if got := answered(resp); got != want {
			t.Fatalf("%s: answered %q, want %q", what, got, want)
		}
	}

	all := map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}
	resp := send(sessionFetch(0, 0, "s", all))
	expect("full fetch opening a session", resp, 0, "0:1:r 1:1:r 2:1:r 3:1:r")
	id := resp.SessionID
	if id == 0 {
		t.Fatal("a full fetch at epoch 0 opened no session (session id 0)")
	}

	// The client consumed every record: it moves all four fetch offsets.
	resp = send(sessionFetch(id, 1, "s", map[int32]int64{0: 1, 1: 1, 2: 1, 3: 1}))
	expect("caught up", resp, 0, "")
	if resp.SessionID != id {
		t.Fatalf("incremental response has session id %d, want %d", resp.SessionID, id)
	}
	// Nothing changed: an empty request, an empty answer.
	resp = send(sessionFetch(id, 2, "s", nil))
	expect("nothing new", resp, 0, "")

	produceTo(t, cl, "s", 2)
	resp = send(sessionFetch(id, 3, "s", nil))
	expect("a record on partition 2", resp, 0, "2:2:r")
	// The client has not moved partition 2's offset yet: the records come
	// again (the session keeps the client's position, not the broker's).
	resp = send(sessionFetch(id, 4, "s", nil))
	expect("offset not moved", resp, 0, "2:2:r")
	resp = send(sessionFetch(id, 5, "s", map[int32]int64{2: 2}))
	expect("offset moved", resp, 0, "")

	// Forget partition 3: a record there is no longer answered.
	resp = send(sessionFetch(id, 6, "s", nil, 3))
	expect("forget 3", resp, 0, "")
	produceTo(t, cl, "s", 3)
	resp = send(sessionFetch(id, 7, "s", nil))
	expect("record on a forgotten partition", resp, 0, "")
	// Add it back at offset 1: its records and offsets are answered.
	resp = send(sessionFetch(id, 8, "s", map[int32]int64{3: 1}))
	expect("partition 3 added back", resp, 0, "3:2:r")

	// Session errors, which leave the session usable.
	resp = send(sessionFetch(id, 8, "s", nil))
	expect("repeated epoch", resp, kerr.InvalidFetchSessionEpoch.Code, "")
	resp = send(sessionFetch(id+1000, 1, "s", nil))
	expect("unknown session", resp, kerr.FetchSessionIDNotFound.Code, "")
	resp = send(sessionFetch(id, 9, "s", map[int32]int64{3: 2}))
	expect("after the errors", resp, 0, "")

	// Epoch -1 ends the session: a sessionless full fetch answers every
	// partition listed, and the old id is gone.
	resp = send(sessionFetch(id, -1, "s", map[int32]int64{0: 1, 1: 1}))
	expect("sessionless fetch closing the session", resp, 0, "0:1 1:1")
	if resp.SessionID != 0 {
		t.Fatalf("sessionless fetch answered with session id %d", resp.SessionID)
	}
	resp = send(sessionFetch(id, 10, "s", nil))
	expect("closed session", resp, kerr.FetchSessionIDNotFound.Code, "")
}

// TestFetchSessionLimits: sessions beyond MaxFetchSessions are not opened
// (session id 0, a normal full fetch), a closed connection gives its
// sessions back, and a negative MaxFetchSessions turns them off.
func TestFetchSessionLimits(t *testing.T) {
	b, addr := memBrokerWith(t, func(c *Config) { c.MaxFetchSessions = 2 })
	cl := newClient(t, addr)
	createTopic(t, cl, "l", 1, nil)
	one := map[int32]int64{0: 0}
	open := func(c net.Conn) int32 {
		return sendFetch(t, c, 1, sessionFetch(0, 0, "l", one)).SessionID
	}
	c1, c2, c3 := dial(t, addr), dial(t, addr), dial(t, addr)
	if open(c1) == 0 || open(c2) == 0 {
		t.Fatal("the first two sessions were not opened")
	}
	if id := open(c3); id != 0 {
		t.Fatalf("a third session opened (id %d) with MaxFetchSessions 2", id)
	}
	_ = c1.Close()
	deadline := time.Now().Add(10 * time.Second)
	for b.fetchSessions.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions held 10 s after a connection with one closed; want 1", b.fetchSessions.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id := open(c3); id == 0 {
		t.Fatal("no session opened after a connection gave its session back")
	}

	_, addr = memBrokerWith(t, func(c *Config) { c.MaxFetchSessions = -1 })
	createTopic(t, newClient(t, addr), "l", 1, nil)
	if resp := sendFetch(t, dial(t, addr), 1, sessionFetch(0, 0, "l", one)); resp.SessionID != 0 || answered(resp) != "0:0" {
		t.Fatalf("MaxFetchSessions -1: session %d, answered %q; want 0 and \"0:0\"", resp.SessionID, answered(resp))
	}
}

// TestFetchSessionConsumer: a franz-go consumer (which uses sessions) of
// 64 partitions reads every record once, in order per partition, while the
// producer keeps writing to a few of them.
func TestFetchSessionConsumer(t *testing.T) {
	b, addr := memBrokerWith(t, nil)
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "c", 64, nil)
	const n = 2000
	done := make(chan error, 1)
	go func() {
		for i := range n {
			r := &kgo.Record{Topic: "c", Partition: int32(i*7) % 64, Value: fmt.Appendf(nil, "%d", i)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	consumer := newClient(t, addr, kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := map[int32]int64{}
	seen := 0
	for seen < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", seen, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d (a record lost or repeated)", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			seen++
		})
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.fetchSessions.Load() == 0 {
		t.Fatal("the consumer fetched without a session")
	}
}
