package broker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
)

// nfsStore opens the nfs driver on a fresh directory (fsync off: the tests
// check protocol behaviour, not the host's durability).
func nfsStore(t testing.TB, dir string) *stream.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := nfs.Open(context.Background(), []byte(fmt.Sprintf("root: %s\ncreate_root: true\nfsync: false\n", dir)))
	if err != nil {
		t.Fatalf("nfs.Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startBroker runs a broker on st listening on a free local port.
func startBroker(t testing.TB, st *stream.Store, mod func(*Config)) (*Broker, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st, Advertise: ln.Addr().String(), Logger: testLogger(t), AutoCreateTopics: true, FenceCheckInterval: 200 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(context.Background(), cfg)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("broker.New: %v", err)
	}
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() { _ = b.Close() })
	return b, ln.Addr().String()
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		vv := v
		c.Value = &vv
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", name, err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("CreateTopics %s: %s", name, errorFor(c))
	}
}

func deleteTopic(t testing.TB, cl *kgo.Client, name string) {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{name}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("DeleteTopics %s: %v", name, err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("DeleteTopics %s: %s", name, errorFor(c))
	}
}

// committedSum is the sum of a group's committed offsets (OffsetFetch).
func committedSum(t testing.TB, cl *kgo.Client, group string) int64 {
	t.Helper()
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = group
	resp, err := of.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	var total int64
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			total += p.Offset
		}
	}
	return total
}

// record is what a test produced and expects back.
type record struct {
	partition int32
	offset    int64
	key, val  []byte
}

// produceN produces n records round-robin over the topic's partitions and
// returns the acked ones.
func produceN(t testing.TB, cl *kgo.Client, topic string, n int, size int) []record {
	t.Helper()
	var mu sync.Mutex
	var acked []record
	var firstErr error
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		val := bytes.Repeat([]byte{byte(i)}, size)
		copy(val, fmt.Sprintf("v%08d", i))
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: val}
		wg.Add(1)
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			acked = append(acked, record{r.Partition, r.Offset, r.Key, r.Value})
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	return acked
}

// checkConsumed asserts that got holds every acked record exactly once, in
// offset order per partition, byte for byte.
func checkConsumed(t testing.TB, acked []record, got []record) {
	t.Helper()
	want := map[[2]int64]record{}
	for _, r := range acked {
		want[[2]int64{int64(r.partition), r.offset}] = r
	}
	seen := map[[2]int64]bool{}
	last := map[int32]int64{}
	for _, r := range got {
		k := [2]int64{int64(r.partition), r.offset}
		if seen[k] {
			t.Fatalf("partition %d offset %d consumed twice", r.partition, r.offset)
		}
		seen[k] = true
		if l, ok := last[r.partition]; ok && r.offset <= l {
			t.Fatalf("partition %d: offset %d after %d", r.partition, r.offset, l)
		}
		last[r.partition] = r.offset
		if w, ok := want[k]; ok && (!bytes.Equal(w.key, r.key) || !bytes.Equal(w.val, r.val)) {
			t.Fatalf("partition %d offset %d: consumed bytes differ from produced", r.partition, r.offset)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Fatalf("acked record partition %d offset %d not consumed", k[0], k[1])
		}
	}
}

// consumeAll reads the topic from the start until n records arrived.
func consumeAll(t testing.TB, addr, topic string, n int, opts ...kgo.Opt) []record {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got []record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, record{r.Partition, r.Offset, r.Key, r.Value}) })
	}
	return got
}

func TestProduceConsumeSmall(t *testing.T) {
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr)
	createTopic(t, cl, "small", 3, nil)
	acked := produceN(t, cl, "small", 1000, 100)
	if len(acked) != 1000 {
		t.Fatalf("acked %d of 1000", len(acked))
	}
	got := consumeAll(t, addr, "small", 1000)
	checkConsumed(t, acked, got)
}
