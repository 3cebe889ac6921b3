package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceEach produces n records of size random bytes (they do not
// compress) to partition 0 of topic, one batch each.
func produceEach(t testing.TB, cl *kgo.Client, topic string, n, size int) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: make([]byte, size)}
		for j := range r.Value {
			r.Value[j] = byte(rnd.Uint32())
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// greedyFetch is a Fetch of version v listing partition 0 of topic times
// times, every limit at 2^31-1 and no wait.
func greedyFetch(v int16, topic string, times int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID = -1
	req.MinBytes = 1
	req.MaxBytes = 1<<31 - 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for range times {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1<<31 - 1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// sendFetch writes req on c and returns its decoded response.
func sendFetch(t *testing.T, c net.Conn, corr int32, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	if _, err := c.Write(rawFrame(1, req.Version, corr, req.AppendTo(nil))); err != nil {
		t.Fatal(err)
	}
	resp, err := readFetchResponse(c, req.Version)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readFetchResponse reads and decodes a Fetch response of version v from
// c (safe off the test's goroutine).
func readFetchResponse(c net.Conn, v int16) (*kmsg.FetchResponse, error) {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return nil, fmt.Errorf("reading the Fetch response size: %w", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, fmt.Errorf("reading the Fetch response: %w", err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	if err := resp.ReadFrom(b[4:]); err != nil {
		return nil, fmt.Errorf("decoding the Fetch response: %w", err)
	}
	return resp, nil
}

// recordBytes sums the record bytes of a Fetch response and counts its
// partitions.
func recordBytes(resp *kmsg.FetchResponse) (bytes, partitions int) {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			bytes += len(rp.RecordBatches)
			partitions++
		}
	}
	return bytes, partitions
}

// TestFetchRepeatedPartitionAnsweredOnce: a Fetch listing partition 0
// three times, in two topic entries, is answered with that partition once
// (the records once).
func TestFetchRepeatedPartitionAnsweredOnce(t *testing.T) {
	_, addr := memBrokerWith(t, nil)
	cl := newClient(t, addr)
	createTopic(t, cl, "dup", 1, nil)
	produceEach(t, cl, "dup", 3, 1000)
	req := greedyFetch(11, "dup", 2)
	req.Topics = append(req.Topics, req.Topics[0])
	resp := sendFetch(t, dial(t, addr), 1, req)
	n, parts := recordBytes(resp)
	if len(resp.Topics) != 1 || parts != 1 {
		t.Fatalf("a partition listed 4 times in 2 topic entries: answered in %d topics, %d partitions (%d record bytes); want 1 and 1", len(resp.Topics), parts, n)
	}
	if n < 3000 || n > 4000 {
		t.Fatalf("%d record bytes for 3 records of 1000 bytes", n)
	}
}

// TestFetchMaxBytesCapsResponse: with FetchMaxBytes 1 MiB, a Fetch asking
// for 2^31-1 bytes gets at most 1 MiB of records.
func TestFetchMaxBytesCapsResponse(t *testing.T) {
	_, addr := memBrokerWith(t, func(c *Config) { c.FetchMaxBytes = 1 << 20 })
	cl := newClient(t, addr)
	createTopic(t, cl, "cap", 1, nil)
	produceEach(t, cl, "cap", 10, 300_000)
	n, _ := recordBytes(sendFetch(t, dial(t, addr), 1, greedyFetch(11, "cap", 1)))
	t.Logf("%d record bytes", n)
	if n == 0 || n > 1<<20 {
		t.Fatalf("%d record bytes in a response; want 1..%d (FetchMaxBytes)", n, 1<<20)
	}
}

// TestFetchMemoryBudget: six connections fetching 4 MiB each and not
// reading their responses hold at most FetchMemoryBytes (8 MiB) plus one
// batch of records in the broker at once; fetches over it wait for room
// and are answered once the others are read.
func TestFetchMemoryBudget(t *testing.T) {
	b, addr := memBrokerWith(t, func(c *Config) {
		c.FetchMaxBytes = 4 << 20
		c.FetchMemoryBytes = 8 << 20
	})
	cl := newClient(t, addr)
	createTopic(t, cl, "mem", 1, nil)
	const batch = 500_000
	produceEach(t, cl, "mem", 40, batch)
	var conns []net.Conn
	for i := range 6 {
		c := dial(t, addr)
		req := greedyFetch(11, "mem", 1)
		req.MaxWaitMillis = 20000
		if _, err := c.Write(rawFrame(1, 11, int32(i), req.AppendTo(nil))); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	got := make([]int, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			resp, err := readFetchResponse(c, 11)
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			got[i], _ = recordBytes(resp)
		})
	}
	wg.Wait()
	for i, n := range got {
		if n == 0 {
			t.Fatalf("connection %d: no records (the fetch should wait for room, not give up)", i)
		}
	}
	used, peak := b.fetchMem.stats()
	t.Logf("fetch memory: peak %d KiB, now %d", peak>>10, used)
	if peak > 8<<20+batch+100 {
		t.Fatalf("fetch memory peaked at %d bytes; want at most FetchMemoryBytes (%d) + one batch", peak, 8<<20)
	}
	if peak < 4<<20 {
		t.Fatalf("fetch memory peaked at %d bytes: the fetches did not overlap, the test proves nothing", peak)
	}
}

// TestFetchAmplification reproduces the finding: a topic of 100 records
// of 1 MB, and from two connections a Fetch v11 listing its partition
// eight times with every limit at 2^31-1. Each response holds the
// partition once and at most FetchMaxBytes (55 MiB) of records, and the
// broker's heap does not grow by gigabytes.
func TestFetchAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MB and fetches it from two connections")
	}
	_, addr := memBrokerWith(t, nil)
	cl := newClient(t, addr, kgo.ProducerBatchMaxBytes(1<<20))
	createTopic(t, cl, "amp", 1, nil)
	produceEach(t, cl, "amp", 100, 1_000_000)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	sizes := make([][2]int, 2)
	for i := range 2 {
		c := dial(t, addr)
		if _, err := c.Write(rawFrame(1, 11, int32(i), greedyFetch(11, "amp", 8).AppendTo(nil))); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			resp, err := readFetchResponse(c, 11)
			if err != nil {
				t.Errorf("connection %d: %v", i, err)
				return
			}
			n, parts := recordBytes(resp)
			sizes[i] = [2]int{n, parts}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	grew := int64(peak.Load()) - int64(base)
	t.Logf("responses (record bytes, partitions): %v; heap peak %d MiB above %d MiB", sizes, grew>>20, base>>20)
	for i, s := range sizes {
		if s[1] != 1 || s[0] == 0 || s[0] > 55<<20 {
			t.Errorf("connection %d: %d record bytes in %d partitions; want 1..%d bytes in 1 partition", i, s[0], s[1], 55<<20)
		}
	}
	if grew > 1<<30 {
		t.Errorf("heap grew %d MiB for two fetches", grew>>20)
	}
}
