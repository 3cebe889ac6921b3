package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// topicChunks lists the data chunk files of partition 0 of topic on the
// nfs store in dir, sorted.
func topicChunks(t *testing.T, b *Broker, dir, topic string) []string {
	t.Helper()
	tp := b.catalog.lookup(topic)
	if tp == nil {
		t.Fatalf("no topic %s", topic)
	}
	id := filepath.Base(filepath.Dir(tp.parts[0].name)) // CLUSTER/t/ID/0
	chunks, err := filepath.Glob(filepath.Join(dir, "objects", b.cfg.Cluster+"@", "t@", id+"@", "0@", "data.stream@", "*", "c@", "*"))
	if err != nil || len(chunks) == 0 {
		t.Fatalf("no data chunks of %s under %s: %v", topic, dir, err)
	}
	sort.Strings(chunks)
	return chunks
}

// corruptTail flips a byte in the last data chunk of partition 0 of topic
// on the nfs store in dir, and returns the chunk's path and a func that
// puts its bytes back.
func corruptTail(t *testing.T, b *Broker, dir, topic string) (string, func()) {
	t.Helper()
	chunks := topicChunks(t, b, dir, topic)
	last := chunks[len(chunks)-1]
	orig, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), orig...)
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(last, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	return last, func() {
		if err := os.WriteFile(last, orig, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCode sends a Produce of one record to partition 0 of topic until it
// is answered with code, for at most a minute.
func waitCode(t *testing.T, cl *kgo.Client, topic string, code int16, logs *logBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := produceCode(t, cl, topic)
		if got == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce to %s: %s after a minute, want %s:\n%s", topic, errorFor(got), errorFor(code), logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produceCode sends one Produce of a record to partition 0 of topic and
// returns the partition's error code.
func produceCode(t *testing.T, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := sharedlogtest.ProduceRequest(topic, 0, sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1, Tag: "to-" + topic, Timestamp: time.Now().UnixMilli()}))
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("Produce to %s: %v", topic, err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// get returns the status and body of a GET of path on h.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// TestCorruptPartitionDoesNotStopTakeover: a broker is abandoned (as a
// crashed one would be) and the tail chunk of topic bad's partition is
// corrupted, so that the next broker's open of it fails ErrCorrupt. That
// broker still takes over: topic good is produced to and fetched,
// Produce and Fetch of bad get KAFKA_STORAGE_ERROR, Metadata names the
// broker as bad's leader, the failure is logged once naming the topic,
// partition and chunk, /readyz stays 200 naming bad-0 and
// strata_broker_partitions_failed is 1. Once the chunk is mended, the
// background reopen serves bad again.
func TestCorruptPartitionDoesNotStopTakeover(t *testing.T) {
	dir := t.TempDir()
	b1, addr1 := startBroker(t, nfsStore(t, dir), nil)
	cl1 := newClient(t, addr1)
	for _, topic := range []string{"good", "bad"} {
		createTopic(t, cl1, topic, 1, nil)
		produceEach(t, cl1, topic, 3, 100)
	}
	cl1.Close()
	last, mend := corruptTail(t, b1, dir, "bad")

	var logs logBuffer
	b, addr := startBroker(t, nfsStore(t, dir), func(c *Config) { // b1 is not closed: a crash
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	cl := newClient(t, addr)
	if code := produceCode(t, cl, "good"); code != 0 {
		t.Fatalf("produce to good: %s", errorFor(code))
	}
	if sp := fetchAt(t, cl, "good", 0); sp.ErrorCode != 0 || len(batchOffsets(t, sp.RecordBatches)) != 4 {
		t.Fatalf("fetch of good: %s, %d bytes; want its 4 batches", errorFor(sp.ErrorCode), len(sp.RecordBatches))
	}
	if code := produceCode(t, cl, "bad"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to bad, whose partition failed to open: %s; want KAFKA_STORAGE_ERROR", errorFor(code))
	}
	if sp := fetchAt(t, cl, "bad", 0); sp.ErrorCode != kerr.KafkaStorageError.Code || len(sp.RecordBatches) != 0 {
		t.Fatalf("fetch of bad: %s, %d bytes; want KAFKA_STORAGE_ERROR", errorFor(sp.ErrorCode), len(sp.RecordBatches))
	}
	meta := kmsg.NewPtrMetadataRequest()
	mresp, err := meta.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range mresp.Topics {
		if p := mt.Partitions[0]; p.ErrorCode != 0 || p.Leader != b.Epoch() {
			t.Fatalf("Metadata of %s: leader %d, %s; want this broker (%d)", *mt.Topic, p.Leader, errorFor(p.ErrorCode), b.Epoch())
		}
	}
	h := b.Handler()
	if code, body := get(t, h, "/readyz"); code != 200 || !strings.Contains(body, "1 partition failed to open") || !strings.Contains(body, "bad-0") {
		t.Fatalf("/readyz: %d %q; want 200 naming bad-0", code, body)
	}
	if _, m := get(t, h, "/metrics"); !strings.Contains(m, "\nstrata_broker_partitions_failed 1\n") {
		t.Fatalf("/metrics without strata_broker_partitions_failed 1:\n%s", m)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="partition failed to open`); n != 1 || !strings.Contains(out, "topic=bad partition=0") ||
		!strings.Contains(out, filepath.Base(last)) || !strings.Contains(out, "corrupt data") {
		t.Fatalf("want the failed open logged once naming bad-0 and its chunk %s; %d times:\n%s", filepath.Base(last), n, out)
	}

	mend()
	waitCode(t, cl, "bad", 0, &logs)
	if sp := fetchAt(t, cl, "bad", 0); sp.ErrorCode != 0 || len(batchOffsets(t, sp.RecordBatches)) != 4 {
		t.Fatalf("fetch of bad after the reopen: %s, %d bytes; want 4 batches", errorFor(sp.ErrorCode), len(sp.RecordBatches))
	}
	if _, m := get(t, h, "/metrics"); !strings.Contains(m, "\nstrata_broker_partitions_failed 0\n") {
		t.Fatalf("/metrics after the reopen without strata_broker_partitions_failed 0:\n%s", m)
	}
	// The reopen is logged just after the partition serves again: wait
	// for the line rather than read the log once.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "partition reopened"); {
		if time.Now().After(deadline) {
			t.Fatalf("no reopen logged within 10 s:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTakeoverFailsWhenAStoreIsDown: when no partition of a store can be
// opened because the store is unavailable (here closed: ErrClosed), the
// takeover fails naming the store, rather than serving every partition
// of it as failed.
func TestTakeoverFailsWhenAStoreIsDown(t *testing.T) {
	routed := nfsStore(t, "")
	route := func(st *stream.Store) func(*Config) {
		return func(c *Config) { c.Routes = []Route{{Prefix: "r-", Driver: "routed", Store: st}} }
	}
	b1, addr := startBroker(t, nfsStore(t, ""), route(routed))
	cl := newClient(t, addr)
	createTopic(t, cl, "r-one", 2, nil)
	cl.Close()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := routed.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := b1.cfg
	cfg.Logger = testLogger(t)
	b, err := New(context.Background(), cfg)
	if err == nil {
		_ = b.Close()
		t.Fatal("a takeover with every partition of a store unavailable succeeded")
	}
	if !errors.Is(err, stream.ErrClosed) || !strings.Contains(err.Error(), "no partition on routed could be opened") {
		t.Fatalf("takeover error: %v; want one naming the routed store", err)
	}
	t.Logf("takeover: %v", err)
}

// TestClusterCorruptPartitionKeptFailed: in a cluster on etcd, broker A's
// lease is revoked with its partitions left open (to the storage, a
// crash) and the tail chunk of topic bad is corrupted; broker B, assigned
// every unit, serves good, keeps bad failed (KAFKA_STORAGE_ERROR, Metadata
// names B its leader, logged once, strata_broker_partitions_failed 1)
// and serves it once the chunk is mended, counting it owned.
func TestClusterCorruptPartitionKeptFailed(t *testing.T) {
	testbed.SkipShort(t, "the etcd testbed")
	env, err := testbed.Env("etcd", "STRATA_ETCD_ENDPOINTS")
	if err != nil {
		t.Fatal(err)
	}
	endpoints := strings.Split(env["STRATA_ETCD_ENDPOINTS"], ",")
	dir, name := t.TempDir(), testClusterName(t)
	a, ma, addrA := joinClusterBroker(t, endpoints, name, dir, nil)
	clA := newClient(t, addrA)
	for _, topic := range []string{"good", "bad"} {
		createTopic(t, clA, topic, 1, nil)
		produceEach(t, clA, topic, 3, 100)
	}
	clA.Close()
	if err := ma.Close(); err != nil {
		t.Fatal(err)
	}
	_, mend := corruptTail(t, a, dir, "bad")

	var logs logBuffer
	b, _, addrB := joinClusterBroker(t, endpoints, name, dir, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	cl := newClient(t, addrB)
	waitCode(t, cl, "good", 0, &logs)
	waitCode(t, cl, "bad", kerr.KafkaStorageError.Code, &logs)
	resp, err := metadataOf(cl, "bad")
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Leader != b.nodeID {
		t.Fatalf("Metadata of bad: leader %d, %s; want broker B (%d)", p.Leader, errorFor(p.ErrorCode), b.nodeID)
	}
	if got := b.failedPartitions(); len(got) != 1 || got[0] != "bad-0" {
		t.Fatalf("failed partitions %v, want [bad-0]", got)
	}
	if _, m := get(t, b.Handler(), "/metrics"); !strings.Contains(m, "\nstrata_broker_partitions_failed 1\n") {
		t.Fatalf("/metrics without strata_broker_partitions_failed 1:\n%s", m)
	}
	time.Sleep(2 * time.Second) // a few cluster syncs: none opens bad again
	if n := strings.Count(logs.String(), `msg="partition failed to open`); n != 1 {
		t.Fatalf("the failed open logged %d times, want once:\n%s", n, logs.String())
	}
	mend()
	waitCode(t, cl, "bad", 0, &logs)
	if s := b.ClusterStats(); s.Owned != 2 {
		t.Fatalf("broker B owns %d partitions after bad reopened, want 2", s.Owned)
	}
}
