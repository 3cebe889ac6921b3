package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// produceFrame is a Produce request frame as a client sends it: size
// prefix, header (with tags when flexible), req's body, then extra bytes.
func produceFrame(req *kmsg.ProduceRequest, corr int32, clientID *string, headerTags, extra []byte) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	if req.IsFlexible() {
		b = append(b, headerTags...)
	}
	b = req.AppendTo(b)
	b = append(b, extra...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// randomTags are tagged fields for a flexible struct: none, or a few
// unknown ones.
func randomTags(rng *rand.Rand) kmsg.Tags {
	var t kmsg.Tags
	if rng.IntN(3) == 0 {
		for range 1 + rng.IntN(3) {
			v := make([]byte, rng.IntN(300))
			for i := range v {
				v[i] = byte(rng.Uint32())
			}
			t.Set(uint32(rng.IntN(200)), v)
		}
	}
	return t
}

func randomString(rng *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz-._0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

// randomProduce is a random Produce request of version 3–11, records
// being arbitrary bytes (the parser does not look into them).
func randomProduce(rng *rand.Rand) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = int16(3 + rng.IntN(9))
	if rng.IntN(4) == 0 {
		id := randomString(rng, rng.IntN(20))
		req.TransactionID = &id
	}
	req.Acks = int16(rng.IntN(3) - 1)
	req.TimeoutMillis = rng.Int32()
	for range rng.IntN(5) {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = randomString(rng, rng.IntN(30))
		for range rng.IntN(6) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = rng.Int32N(1000) - 10
			switch rng.IntN(6) {
			case 0: // null
			case 1:
				rp.Records = []byte{}
			default:
				rp.Records = make([]byte, rng.IntN(3000))
				for i := range rp.Records {
					rp.Records[i] = byte(rng.Uint32())
				}
			}
			if req.IsFlexible() {
				rp.UnknownTags = randomTags(rng)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if req.IsFlexible() {
			rt.UnknownTags = randomTags(rng)
		}
		req.Topics = append(req.Topics, rt)
	}
	if req.IsFlexible() {
		req.UnknownTags = randomTags(rng)
	}
	return req
}

// parsed is what parseProduce handed on, as a request.
type parsed struct {
	req      *kmsg.ProduceRequest
	corr     int32
	clientID *string
	calls    int // partition calls
}

// parseFrame runs parseProduce over frame (with its size prefix), read
// through a bufio.Reader of a small buffer so that fields straddle reads.
func parseFrame(frame []byte) (*parsed, error) {
	size := int(binary.BigEndian.Uint32(frame))
	r := bufio.NewReaderSize(bytes.NewReader(frame[4:]), 16)
	out := &parsed{}
	err := parseProduce(&frameReader{r: r, left: size, budget: newByteBudget(1 << 20)}, produceParts{
		begin: func(req *kmsg.ProduceRequest, corr int32, clientID *string) {
			out.req, out.corr, out.clientID = req, corr, clientID
		},
		topic: func(name string, n int) {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = name
			rt.Partitions = make([]kmsg.ProduceRequestTopicPartition, n)
			out.req.Topics = append(out.req.Topics, rt)
		},
		partition: func(i int, partition int32, records []byte) {
			rp := &out.req.Topics[len(out.req.Topics)-1].Partitions[i]
			rp.Partition, rp.Records = partition, records
			out.calls++
		},
	})
	if err == nil && r.Buffered() > 0 {
		return nil, fmt.Errorf("%d bytes read past the frame", r.Buffered())
	}
	return out, err
}

// sameProduce compares the fields the broker uses (not tagged fields),
// records' nil-ness included.
func sameProduce(a, b *kmsg.ProduceRequest) error {
	if (a.TransactionID == nil) != (b.TransactionID == nil) || a.TransactionID != nil && *a.TransactionID != *b.TransactionID {
		return errors.New("transactional id differs")
	}
	if a.Acks != b.Acks || a.TimeoutMillis != b.TimeoutMillis || a.Version != b.Version {
		return fmt.Errorf("acks %d/%d timeout %d/%d version %d/%d", a.Acks, b.Acks, a.TimeoutMillis, b.TimeoutMillis, a.Version, b.Version)
	}
	if len(a.Topics) != len(b.Topics) {
		return fmt.Errorf("%d topics, want %d", len(a.Topics), len(b.Topics))
	}
	for i, ta := range a.Topics {
		tb := b.Topics[i]
		if ta.Topic != tb.Topic || len(ta.Partitions) != len(tb.Partitions) {
			return fmt.Errorf("topic %d: %q with %d partitions, want %q with %d", i, ta.Topic, len(ta.Partitions), tb.Topic, len(tb.Partitions))
		}
		for j, pa := range ta.Partitions {
			pb := tb.Partitions[j]
			if pa.Partition != pb.Partition || !bytes.Equal(pa.Records, pb.Records) || (pa.Records == nil) != (pb.Records == nil) {
				return fmt.Errorf("topic %d partition %d: %d (%d bytes, nil %v), want %d (%d bytes, nil %v)", i, j,
					pa.Partition, len(pa.Records), pa.Records == nil, pb.Partition, len(pb.Records), pb.Records == nil)
			}
		}
	}
	return nil
}

// TestReadProduceMatchesKmsg: the Produce requests of every version that
// kmsg encodes (tagged fields, null and empty records, bytes past the
// request included) are read field by field into what kmsg's ReadFrom
// reads from the whole frame, each partition handed on once; every
// truncation of a frame, and every frame whose body kmsg rejects, is
// errFrame; a connection ending inside a frame is io.ErrUnexpectedEOF.
func TestReadProduceMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	runs, truncs, mutated, rejected := 2000, 0, 0, 0
	for n := range runs {
		req := randomProduce(rng)
		var clientID *string
		if rng.IntN(3) > 0 {
			id := randomString(rng, rng.IntN(10))
			clientID = &id
		}
		headerTags := []byte{0}
		if rng.IntN(4) == 0 {
			headerTags = []byte{1, 5, 2, 'h', 'i'}
		}
		var extra []byte
		if rng.IntN(5) == 0 {
			extra = []byte("trailing")
		}
		corr := rng.Int32()
		frame := produceFrame(req, corr, clientID, headerTags, extra)
		got, err := parseFrame(frame)
		if err != nil {
			t.Fatalf("request %d (v%d, %d bytes): %v", n, req.Version, len(frame), err)
		}
		want := kmsg.NewPtrProduceRequest()
		want.Version = req.Version
		if err := want.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		if err := sameProduce(got.req, want); err != nil {
			t.Fatalf("request %d (v%d): %v", n, req.Version, err)
		}
		parts := 0
		for _, rt := range want.Topics {
			parts += len(rt.Partitions)
		}
		if got.corr != corr || got.calls != parts || (got.clientID == nil) != (clientID == nil) || clientID != nil && *got.clientID != *clientID {
			t.Fatalf("request %d: corr %d/%d, %d partitions handed on of %d, client id %v/%v", n, got.corr, corr, got.calls, parts, got.clientID, clientID)
		}
		if n%20 == 0 && extra == nil {
			// Every frame cut short (its size prefix saying so) is malformed.
			for cut := 4; cut < len(frame); cut++ {
				short := bytes.Clone(frame[:cut])
				binary.BigEndian.PutUint32(short, uint32(cut-4))
				if _, err := parseFrame(short); !errors.Is(err, errFrame) {
					t.Fatalf("request %d cut to %d of %d bytes: %v, want errFrame", n, cut, len(frame), err)
				}
				// The connection ending there, the size prefix saying more.
				if _, err := parseFrame(frame[:cut]); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("request %d, connection ending after %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, cut, len(frame), err)
				}
				truncs++
			}
		}
		// A body with bytes changed: read as kmsg reads it, or refused
		// when kmsg refuses it.
		bodyAt := len(frame) - len(extra) - len(req.AppendTo(nil))
		if bodyAt >= len(frame)-len(extra) {
			continue
		}
		bad := bytes.Clone(frame)
		for range 1 + rng.IntN(3) {
			bad[bodyAt+rng.IntN(len(frame)-len(extra)-bodyAt)] = byte(rng.Uint32())
		}
		want = kmsg.NewPtrProduceRequest()
		want.Version = req.Version
		kerr := want.ReadFrom(bad[bodyAt:])
		got, err = parseFrame(bad)
		mutated++
		switch {
		case kerr != nil && !errors.Is(err, errFrame):
			t.Fatalf("request %d mutated: kmsg refuses it (%v), parseProduce: %v", n, kerr, err)
		case kerr == nil && err != nil:
			t.Fatalf("request %d mutated: kmsg reads it, parseProduce: %v", n, err)
		case kerr == nil:
			if err := sameProduce(got.req, want); err != nil {
				t.Fatalf("request %d mutated: %v", n, err)
			}
		default:
			rejected++
		}
	}
	t.Logf("%d requests, %d truncations, %d mutated (%d refused by both)", runs, truncs, mutated, rejected)
}

// TestProduceWireMalformedMidRequest: a Produce request whose second
// partition claims more bytes than its frame holds closes the
// connection (counted as a bad frame), and the broker keeps serving.
func TestProduceWireMalformedMidRequest(t *testing.T) {
	b, addr := memBrokerWith(t, nil)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	for i := range 2 {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(i)
		rp.Records = make([]byte, 100)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := produceFrame(req, 1, nil, nil, nil)
	// The second partition's records length, the frame's last 104 bytes'
	// first 4: past the frame's end.
	binary.BigEndian.PutUint32(frame[len(frame)-104:], 1000)
	before := b.metrics.badFrames.Load()
	c := dial(t, addr)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if got := b.metrics.badFrames.Load() - before; got != 1 {
		t.Fatalf("bad frames counted %d, want 1", got)
	}
	apiVersionsOK(t, addr)
}

// TestProduceWireSlowClient: a Produce request sent a few bytes at a
// time, its partitions' records arriving over several reads, is
// answered like one sent at once, and the records are read back.
func TestProduceWireSlowClient(t *testing.T) {
	_, addr := memBrokerWith(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The topic, created with the first record.
	if err := cl.ProduceSync(t.Context(), kgo.StringRecord("first")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "slow"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 2, Tag: "slow", Timestamp: time.Now().UnixMilli()})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame := produceFrame(req, 77, nil, []byte{0}, nil)
	for i := 0; i < len(frame); i += 7 {
		if _, err := c.Write(frame[i:min(i+7, len(frame))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	body := readFrame(t, c)
	if corr := int32(binary.BigEndian.Uint32(body)); corr != 77 {
		t.Fatalf("correlation id %d, want 77", corr)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, header tags
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response %+v", resp)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("partition: error %d base offset %d, want 0 and 1", p.ErrorCode, p.BaseOffset)
	}
	if got := consumeAll(t, addr, "slow", 3); len(got) != 3 || got[2].offset != 2 {
		t.Fatalf("consumed %d records, want 3 at offsets 0-2", len(got))
	}
}

// flushCounting is a store whose streams count the Flush hints they get.
type flushCounting struct {
	stream.DriverStore
	mu      sync.Mutex
	flushes map[string]int
}

func (f *flushCounting) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	st, err := f.DriverStore.Open(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return flushCountingStream{st, f}, nil
}

type flushCountingStream struct {
	stream.DriverStream
	f *flushCounting
}

func (s flushCountingStream) Flush() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.flushes[s.Name()]++
}

// TestProduceFlushesItsLogs: once a Produce request's appends have started,
// the broker tells each of its partitions' streams that no more follow
// (stream.Stream.Flush), so that a stream set cuts them without waiting out
// its linger.
func TestProduceFlushesItsLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem, err := memory.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc := &flushCounting{DriverStore: mem.Driver(), flushes: map[string]int{}}
	_, addr := startBroker(t, stream.NewStore(fc), nil)
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "hinted", 2, nil)
	for i := range 3 {
		rs := []*kgo.Record{{Topic: "hinted", Partition: 0, Value: []byte{byte(i)}}, {Topic: "hinted", Partition: 1, Value: []byte{byte(i)}}}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var hinted []int
	for name, n := range fc.flushes {
		if strings.HasPrefix(name, "strata/t/") && strings.HasSuffix(name, "/data") {
			hinted = append(hinted, n)
		}
	}
	// Three rounds, each partition in one request a round (the client
	// may send a round as one request or two).
	if len(hinted) != 2 || hinted[0] < 3 || hinted[1] < 3 {
		t.Fatalf("Flush hints by stream: %v; want both partitions' data streams, at least one a round each", fc.flushes)
	}
}
