package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// TestKgo100k produces 100,000 records with kgo's default (idempotent,
// acks=all) producer and consumes them back.
func TestKgo100k(t *testing.T) {
	if testing.Short() {
		t.Skip("100k records: not in -short")
	}
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr, kgo.ProducerLinger(5*time.Millisecond))
	createTopic(t, cl, "big", 4, nil)
	const n = 100_000
	acked := produceN(t, cl, "big", n, 64)
	if len(acked) != n {
		t.Fatalf("acked %d of %d", len(acked), n)
	}
	got := consumeAll(t, addr, "big", n)
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	checkConsumed(t, acked, got)
}

// TestIdempotentDuplicateIsNotAppended sends the same idempotent batch
// twice (as a producer retrying after a lost response) and sees one copy.
func TestIdempotentDuplicateIsNotAppended(t *testing.T) {
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr)
	createTopic(t, cl, "idem", 1, nil)
	ctx := context.Background()

	ipReq := kmsg.NewPtrInitProducerIDRequest()
	ip, err := ipReq.RequestWith(ctx, cl)
	if err != nil || ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, errorFor(ip.ErrorCode))
	}
	if ip.ProducerID < 0 {
		t.Fatalf("InitProducerId gave producer id %d", ip.ProducerID)
	}
	batch := func(seq int32, tag string) []byte {
		return sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, Tag: tag, Timestamp: time.Now().UnixMilli(),
			Idempotent: true, ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, BaseSequence: seq})
	}
	produce := func(b []byte) kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "idem"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	r1 := produce(batch(0, "a"))
	r2 := produce(batch(0, "a"))
	r3 := produce(batch(1, "b"))
	r4 := produce(batch(5, "c"))
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r3.ErrorCode != 0 {
		t.Fatalf("produce codes %d %d %d", r1.ErrorCode, r2.ErrorCode, r3.ErrorCode)
	}
	if r2.BaseOffset != r1.BaseOffset || r3.BaseOffset != r1.BaseOffset+1 {
		t.Fatalf("offsets: first %d, duplicate %d, next %d; want the duplicate at the first's offset", r1.BaseOffset, r2.BaseOffset, r3.BaseOffset)
	}
	if r4.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: got %s, want OUT_OF_ORDER_SEQUENCE_NUMBER", errorFor(r4.ErrorCode))
	}
	got := consumeAll(t, addr, "idem", 2)
	if len(got) != 2 || got[0].offset != r1.BaseOffset || got[1].offset != r3.BaseOffset {
		t.Fatalf("consumed %d records, want the first batch and the next, once each", len(got))
	}
}

// TestGroupOfThreeRebalance consumes with a group of three members that
// changes while consuming (a third joins, one leaves) and checks every
// record is consumed exactly once, in order per partition.
func TestGroupOfThreeRebalance(t *testing.T) {
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	admin := newClient(t, addr)
	createTopic(t, admin, "grp", 6, nil)
	const n = 30_000
	acked := produceN(t, admin, "grp", n, 32)

	var mu sync.Mutex
	var got []record
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type consumer struct {
		cl   *kgo.Client
		stop chan struct{}
		done chan struct{}
	}
	start := func() *consumer {
		c := &consumer{stop: make(chan struct{}), done: make(chan struct{})}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g3"), kgo.ConsumeTopics("grp"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.FetchMaxBytes(64<<10), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		c.cl = cl
		go func() {
			defer close(c.done)
			for {
				select {
				case <-c.stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := cl.PollRecords(pctx, 500)
				pcancel()
				var recs []record
				fs.EachRecord(func(r *kgo.Record) { recs = append(recs, record{r.Partition, r.Offset, r.Key, r.Value}) })
				if len(recs) > 0 {
					if err := cl.CommitUncommittedOffsets(ctx); err != nil {
						t.Errorf("commit: %v", err)
					}
					mu.Lock()
					got = append(got, recs...)
					mu.Unlock()
				}
				cl.AllowRebalance()
			}
		}()
		return c
	}
	stopC := func(c *consumer) {
		close(c.stop)
		<-c.done
		c.cl.Close()
	}
	waitFor := func(k int) {
		for count() < k {
			if ctx.Err() != nil {
				t.Fatalf("consumed %d records, waiting for %d: %v", count(), k, ctx.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c1, c2 := start(), start()
	waitFor(5000)
	c3 := start()
	waitFor(15000)
	stopC(c1)
	waitFor(n)
	stopC(c2)
	stopC(c3)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d (exactly once)", len(got), n)
	}
	checkConsumed(t, acked, got)

	// The group's commits are on the store: OffsetFetch sees the end of
	// every partition.
	if total := committedSum(t, admin, "g3"); total != n {
		t.Fatalf("committed offsets sum to %d, want %d", total, n)
	}
}

// TestTakeoverFencesOldBroker starts a second broker on the same storage
// and cluster: it opens every partition at a higher epoch, sees the data
// the first one acked, and the first one stops serving.
func TestTakeoverFencesOldBroker(t *testing.T) {
	dir := t.TempDir()
	a, addrA := startBroker(t, nfsStore(t, dir), nil)
	clA := newClient(t, addrA, kgo.RecordRetries(1))
	createTopic(t, clA, "tk", 2, map[string]string{"retention.ms": "86400000"})
	acked := produceN(t, clA, "tk", 500, 50)

	b, addrB := startBroker(t, nfsStore(t, dir), nil)
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("second broker epoch %d, first %d: want higher", b.Epoch(), a.Epoch())
	}
	// The old broker notices by itself (its fence check polls the broker
	// epochs) and stops serving.
	deadline := time.Now().Add(30 * time.Second)
	for !a.Fenced() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !a.Fenced() || a.Ready() {
		t.Fatalf("old broker not fenced: fenced=%v ready=%v", a.Fenced(), a.Ready())
	}
	ctx := context.Background()
	if err := clA.ProduceSync(ctx, &kgo.Record{Topic: "tk", Value: []byte("late")}).FirstErr(); err == nil {
		t.Fatalf("produce to the fenced broker succeeded")
	}
	// A write the old broker still tries fails on the storage: its
	// partition streams were opened at a higher epoch.
	p, _ := a.catalog.partitionOf("tk", 0)
	p.mu.Lock()
	l := p.log
	p.mu.Unlock()
	if _, err := l.Append(ctx, sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, Tag: "late"}), sharedlog.AppendOptions{}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("append on the old broker's log: %v, want ErrFenced", err)
	}
	// The new broker has the catalog, the configs and every acked record.
	clB := newClient(t, addrB)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "tk"
	res.ConfigNames = []string{"retention.ms"}
	dc.Resources = append(dc.Resources, res)
	dresp, err := dc.RequestWith(ctx, clB)
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 1 || *dresp.Resources[0].Configs[0].Value != "86400000" {
		t.Fatalf("DescribeConfigs retention.ms on the new broker: %v %+v", err, dresp)
	}
	more := produceN(t, clB, "tk", 100, 50)
	got := consumeAll(t, addrB, "tk", 600)
	checkConsumed(t, append(acked, more...), got)
	for _, r := range got {
		if string(r.val) == "late" {
			t.Fatalf("a record the fenced broker did not ack was consumed")
		}
	}
}

// TestKgoTransactionsRefused: a franz-go transactional producer fails at
// once with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (there is no transaction
// coordinator) instead of retrying FindCoordinator until its context ends,
// and the metrics count those FindCoordinator answers under that error.
func TestKgoTransactionsRefused(t *testing.T) {
	b, addr := startBroker(t, nfsStore(t, ""), nil)
	admin := newClient(t, addr)
	createTopic(t, admin, "txn", 1, nil)
	cl := newClient(t, addr, kgo.TransactionalID("strata-kgo-txn"), kgo.DefaultProduceTopic("txn"))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	start := time.Now()
	err := cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
	}
	took := time.Since(start)
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || took > 20*time.Second {
		t.Fatalf("transactional produce: %v after %v; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED within 20s", err, took.Round(time.Millisecond))
	}
	var m strings.Builder
	if _, err := b.Metrics().WriteTo(&m); err != nil {
		t.Fatal(err)
	}
	if want := `strata_broker_requests_total{api="FindCoordinator",error="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}`; !strings.Contains(m.String(), want) {
		t.Errorf("metrics lack %s:\n%s", want, m.String())
	}
}
