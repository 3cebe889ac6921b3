package broker

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/sharedlog"
)

// fetchAt fetches partition 0 of topic from offset with a 1 MiB limit.
func fetchAt(t *testing.T, cl *kgo.Client, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// batchOffsets returns the base offsets of the record batches in recs.
func batchOffsets(t *testing.T, recs []byte) []int64 {
	t.Helper()
	var out []int64
	for len(recs) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(recs); err != nil {
			t.Fatalf("decoding a fetched batch: %v", err)
		}
		out = append(out, rb.FirstOffset)
		recs = recs[12+int(rb.Length):]
	}
	return out
}

// partitionLog is the open log of a topic's partition 0.
func partitionLog(t *testing.T, b *Broker, topic string) *sharedlog.Log {
	t.Helper()
	p, code := b.catalog.partitionOf(topic, 0)
	if code != 0 {
		t.Fatalf("partition %s-0: %s", topic, errorFor(code))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log
}

// TestCorruptChunkFetch: with the chunk of a partition's third batch
// corrupted on disk, a Fetch from offset 0 returns the two intact batches
// before it, a Fetch from the corrupt batch gets KAFKA_STORAGE_ERROR, and
// the partition stays open: the same log takes the next produce.
func TestCorruptChunkFetch(t *testing.T) {
	dir := t.TempDir()
	b1, addr1 := startBroker(t, nfsStore(t, dir), nil)
	cl1 := newClient(t, addr1)
	createTopic(t, cl1, "bad", 1, nil)
	produceEach(t, cl1, "bad", 3, 1000)
	cl1.Close()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	chunks, err := filepath.Glob(filepath.Join(dir, "objects", "strata@", "t@", "*", "0@", "data.stream@", "*", "c@", "*"))
	if err != nil || len(chunks) == 0 {
		t.Fatalf("no data chunks found under %s: %v", dir, err)
	}
	sort.Strings(chunks)
	t.Logf("%d data chunks; corrupting %s", len(chunks), chunks[len(chunks)-1])
	last := chunks[len(chunks)-1]
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(last, data, 0o644); err != nil {
		t.Fatal(err)
	}

	b, addr := startBroker(t, nfsStore(t, dir), nil) // a cold cache
	cl := newClient(t, addr)
	l := partitionLog(t, b, "bad")
	sp := fetchAt(t, cl, "bad", 0)
	if got := batchOffsets(t, sp.RecordBatches); sp.ErrorCode != 0 || len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("fetch from 0: %s, batches at %v; want the intact batches at [0 1]", errorFor(sp.ErrorCode), got)
	}
	if sp := fetchAt(t, cl, "bad", 2); sp.ErrorCode != kerr.KafkaStorageError.Code || len(sp.RecordBatches) != 0 {
		t.Fatalf("fetch from the corrupt batch: %s with %d bytes; want KAFKA_STORAGE_ERROR", errorFor(sp.ErrorCode), len(sp.RecordBatches))
	}
	if partitionLog(t, b, "bad") != l {
		t.Fatal("the partition was closed and reopened after a read of a corrupt chunk")
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "bad", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the corrupt read: %v", err)
	}
	if sp := fetchAt(t, cl, "bad", 3); sp.ErrorCode != 0 || len(batchOffsets(t, sp.RecordBatches)) != 1 {
		t.Fatalf("fetch of the record produced after: %s, %d bytes", errorFor(sp.ErrorCode), len(sp.RecordBatches))
	}
	if partitionLog(t, b, "bad") != l {
		t.Fatal("the partition was reopened")
	}
}

// logBuffer collects a broker's logs (safe for concurrent writers).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mountTmpfs mounts a tmpfs of size under a fresh directory until the test
// ends (it needs root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -t tmpfs -o size=%s (the full-disk test needs root): %v\n%s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// TestFullDiskReadsServed: on an nfs store whose disk fills up, produce
// fails with KAFKA_STORAGE_ERROR, the records already written are still
// fetched (not NOT_LEADER_OR_FOLLOWER), the failing reopen is logged, and
// once space is freed the partition takes produces again.
func TestFullDiskReadsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs (needs root)")
	}
	root := mountTmpfs(t, "4m")
	var logs logBuffer
	_, addr := startBroker(t, nfsStore(t, filepath.Join(root, "data")), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	cl := newClient(t, addr, kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(3*time.Second))
	createTopic(t, cl, "full", 1, nil)
	produceEach(t, cl, "full", 3, 1000)

	filler, err := os.Create(filepath.Join(root, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := filler.Write(make([]byte, 64<<10)); err != nil {
			break // ENOSPC: full
		}
	}
	_ = filler.Close()
	err = cl.ProduceSync(context.Background(), &kgo.Record{Topic: "full", Value: []byte("no room")}).FirstErr()
	if err == nil {
		t.Fatal("produce on a full disk succeeded")
	}
	t.Logf("produce on a full disk: %v", err)
	sp := fetchAt(t, cl, "full", 0)
	if got := batchOffsets(t, sp.RecordBatches); sp.ErrorCode != 0 || len(got) != 3 {
		t.Fatalf("fetch on a full disk: %s, batches at %v; want the 3 written", errorFor(sp.ErrorCode), got)
	}
	for !strings.Contains(logs.String(), "reopening partition failed") {
		if t.Context().Err() != nil {
			t.Fatal("the failing reopen was not logged")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := os.Remove(filepath.Join(root, "filler")); err != nil {
		t.Fatal(err)
	}
	cl2 := newClient(t, addr, kgo.RecordDeliveryTimeout(time.Minute))
	if err := cl2.ProduceSync(context.Background(), &kgo.Record{Topic: "full", Value: []byte("room again")}).FirstErr(); err != nil {
		t.Fatalf("produce after space was freed: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "partition reopened") {
		t.Fatalf("no reopen logged:\n%s", logs.String())
	}
}
