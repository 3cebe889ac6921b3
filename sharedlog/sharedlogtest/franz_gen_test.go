package sharedlogtest

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

var update = flag.Bool("update", false, "regenerate testdata/franz/*.batch with a franz-go producer")

// TestFranzSamples produces each sample with a real franz-go (kgo) client
// against a minimal in-process Kafka endpoint that records the batches the
// client sends, and checks the committed samples are what franz-go makes
// now (byte for byte except timestamps, which we pin by the record
// timestamps). With -update it rewrites the committed files.
func TestFranzSamples(t *testing.T) {
	for _, s := range franzSpecs {
		t.Run(s.name, func(t *testing.T) {
			got := produceWithFranz(t, s)
			path := filepath.Join("testdata", "franz", s.name+".batch")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read committed sample (run with -update to create): %v", err)
			}
			if len(got) < 61 || len(want) < 61 {
				t.Fatalf("sample sizes %d and %d", len(got), len(want))
			}
			// Compressed payloads may differ across codec library versions;
			// the header fields a broker reads must match.
			if got[21] != want[21] || got[22] != want[22] || binary.BigEndian.Uint32(got[57:]) != binary.BigEndian.Uint32(want[57:]) {
				t.Fatalf("franz-go now produces a different %s batch header: attrs %x count %d vs committed attrs %x count %d",
					s.name, got[21:23], binary.BigEndian.Uint32(got[57:]), want[21:23], binary.BigEndian.Uint32(want[57:]))
			}
		})
	}
}

type franzSpec struct {
	name  string
	opts  []kgo.Opt
	txn   bool
	count int
}

var franzSpecs = []franzSpec{
	{name: "plain", opts: []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression())}, count: 10},
	{name: "idempotent", opts: []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}, count: 10},
	{name: "gzip", opts: []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}, count: 50},
	{name: "snappy", opts: []kgo.Opt{kgo.ProducerBatchCompression(kgo.SnappyCompression())}, count: 50},
	{name: "lz4", opts: []kgo.Opt{kgo.ProducerBatchCompression(kgo.Lz4Compression())}, count: 50},
	{name: "zstd", opts: []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}, count: 50},
	{name: "transactional", opts: []kgo.Opt{kgo.TransactionalID("strata-test"), kgo.ProducerBatchCompression(kgo.NoCompression())}, txn: true, count: 10},
	{name: "transactional-zstd", opts: []kgo.Opt{kgo.TransactionalID("strata-test-z"), kgo.ProducerBatchCompression(kgo.ZstdCompression())}, txn: true, count: 30},
}

// produceWithFranz produces s.count records with a kgo client and returns
// the one record batch it sent.
func produceWithFranz(t *testing.T, s franzSpec) []byte {
	t.Helper()
	fb := &fakeBroker{}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers("fake:9092"),
		kgo.Dialer(fb.dial),
		kgo.MaxVersions(kversion.V2_8_0()),
		kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(100 * time.Millisecond),
	}, s.opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.txn {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	base := time.UnixMilli(1_750_000_000_000)
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	for i := range s.count {
		r := &kgo.Record{
			Key:       []byte(fmt.Sprintf("key-%d", i)),
			Value:     []byte(fmt.Sprintf("value %d of sample %s: the quick brown fox jumps over the lazy dog", i, s.name)),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("v")}},
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Partition: 0,
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			perr = errors.Join(perr, err)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		t.Fatalf("produce %s: %v", s.name, perr)
	}
	if s.txn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.batches) != 1 {
		t.Fatalf("franz-go sent %d record batches for %s, want 1", len(fb.batches), s.name)
	}
	return fb.batches[0]
}

// fakeBroker answers just enough of the Kafka protocol (ApiVersions,
// Metadata, InitProducerID, FindCoordinator, AddPartitionsToTxn, Produce,
// EndTxn) for a kgo producer, and records the record batches it is sent.
type fakeBroker struct {
	mu      sync.Mutex
	batches [][]byte
	offset  int64
}

func (fb *fakeBroker) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c, s := net.Pipe()
	go fb.serve(s)
	return c, nil
}

func (fb *fakeBroker) serve(conn net.Conn) {
	defer conn.Close()
	for {
		var sz [4]byte
		if _, err := io.ReadFull(conn, sz[:]); err != nil {
			return
		}
		buf := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(conn, buf); err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(buf))
		ver := int16(binary.BigEndian.Uint16(buf[2:]))
		corr := binary.BigEndian.Uint32(buf[4:])
		cidLen := int(int16(binary.BigEndian.Uint16(buf[8:])))
		body := buf[10+max(cidLen, 0):]
		req := kmsg.RequestForKey(key)
		req.SetVersion(ver)
		if req.IsFlexible() {
			body = body[1:] // empty tagged fields of the request header
		}
		if err := req.ReadFrom(body); err != nil {
			return
		}
		resp := fb.handle(req)
		out := binary.BigEndian.AppendUint32(nil, 0)
		out = binary.BigEndian.AppendUint32(out, corr)
		if resp.IsFlexible() && key != 18 {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

func (fb *fakeBroker) handle(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		out := resp.(*kmsg.ApiVersionsResponse)
		vs := kversion.V2_8_0()
		for k := int16(0); k < 100; k++ {
			if maxV, ok := vs.LookupMaxKeyVersion(k); ok {
				out.ApiKeys = append(out.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: maxV})
			}
		}
	case *kmsg.MetadataRequest:
		out := resp.(*kmsg.MetadataResponse)
		out.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "fake", Port: 9092}}
		out.ControllerID = 0
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr("t")
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Replicas, mp.ISR = []int32{0}, []int32{0}
		mt.Partitions = []kmsg.MetadataResponseTopicPartition{mp}
		out.Topics = []kmsg.MetadataResponseTopic{mt}
	case *kmsg.FindCoordinatorRequest:
		out := resp.(*kmsg.FindCoordinatorResponse)
		out.NodeID, out.Host, out.Port = 0, "fake", 9092
		for _, k := range r.CoordinatorKeys {
			out.Coordinators = append(out.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: 0, Host: "fake", Port: 9092})
		}
	case *kmsg.InitProducerIDRequest:
		out := resp.(*kmsg.InitProducerIDResponse)
		out.ProducerID, out.ProducerEpoch = 4242, 3
	case *kmsg.AddPartitionsToTxnRequest:
		out := resp.(*kmsg.AddPartitionsToTxnResponse)
		for _, tp := range r.Topics {
			rt := kmsg.AddPartitionsToTxnResponseTopic{Topic: tp.Topic}
			for _, p := range tp.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p})
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.EndTxnRequest:
	case *kmsg.ProduceRequest:
		out := resp.(*kmsg.ProduceResponse)
		for _, tp := range r.Topics {
			rt := kmsg.ProduceResponseTopic{Topic: tp.Topic}
			for _, p := range tp.Partitions {
				fb.mu.Lock()
				fb.batches = append(fb.batches, append([]byte(nil), p.Records...))
				base := fb.offset
				fb.offset += int64(binary.BigEndian.Uint32(p.Records[57:]))
				fb.mu.Unlock()
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.BaseOffset = p.Partition, base
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	}
	return resp
}
