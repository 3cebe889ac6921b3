package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/stream"
)

// dyingStore wraps a store so that the next append on a stream whose name
// ends in a given suffix loses its session as a driver process that dies
// would: "landed" (the batch is durable, the ack is lost) or "lost" (the
// batch never reached the store). Later calls on that session fail with
// ErrUnavailable; a new Open works.
type dyingStore struct {
	stream.DriverStore
	mu   sync.Mutex
	next map[string]string // name suffix -> mode
}

func (d *dyingStore) dieOnNextAppend(suffix, mode string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next[suffix] = mode
}

func (d *dyingStore) take(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for suffix, mode := range d.next {
		if strings.HasSuffix(name, suffix) {
			delete(d.next, suffix)
			return mode
		}
	}
	return ""
}

func (d *dyingStore) Open(ctx context.Context, name string, opts stream.OpenOptions) (stream.DriverStream, error) {
	s, err := d.DriverStore.Open(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return &dyingStream{DriverStream: s, d: d}, nil
}

type dyingStream struct {
	stream.DriverStream
	d    *dyingStore
	dead atomic.Bool
}

func (s *dyingStream) Append(ctx context.Context, b stream.Batch) *stream.AppendFuture {
	gone := fmt.Errorf("%w: append to %s: driver process exited: signal: killed", stream.ErrUnavailable, s.Name())
	if s.dead.Load() {
		return stream.FailedAppend(gone)
	}
	switch s.d.take(s.Name()) {
	case "lost":
		s.dead.Store(true)
		return stream.FailedAppend(gone)
	case "landed":
		_, err := stream.Append(ctx, s.DriverStream, b)
		s.dead.Store(true)
		if err != nil {
			return stream.FailedAppend(err)
		}
		return stream.FailedAppend(gone)
	}
	return s.DriverStream.Append(ctx, b)
}

// TestClusterStreamsSurviveLostSession: the catalog and offsets streams'
// sessions die under an append (a driver process killed and restarted),
// once after the batch landed and once before. CreateTopics and
// OffsetCommit still succeed, each record is in its stream exactly once,
// and a broker taking over sees every topic and offset.
func TestClusterStreamsSurviveLostSession(t *testing.T) {
	base := nfsStore(t, "")
	st := &dyingStore{DriverStore: base.Driver(), next: map[string]string{}}
	_, addr := startBroker(t, stream.NewStore(st), nil)
	cl := newClient(t, addr)
	for i, mode := range []string{"landed", "lost"} {
		st.dieOnNextAppend("/__topics", mode)
		createTopic(t, cl, fmt.Sprintf("t%d", i), 1, nil)
		st.dieOnNextAppend("/__offsets", mode)
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = "g", -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: fmt.Sprintf("t%d", i), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: int64(10 + i), LeaderEpoch: -1}}}}
		if ocr, err := oc.RequestWith(context.Background(), cl); err != nil || ocr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("OffsetCommit after a %s append: %v %+v", mode, err, ocr)
		}
	}

	// The catalog holds each create once.
	ctx := context.Background()
	s, err := base.Open(ctx, "strata/__topics", stream.OpenOptions{Mode: stream.ModeReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	creates := map[string]int{}
	_, _ = s.Fetch(ctx, s.StartOffset(), stream.NoEnd, 1)
	if err := readStream(ctx, s, func(p []byte) error {
		var r catalogRecord
		if err := json.Unmarshal(p, &r); err != nil {
			return err
		}
		creates[r.Name]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if creates["t0"] != 1 || creates["t1"] != 1 {
		t.Fatalf("catalog creates per topic: %v, want t0 and t1 once", creates)
	}

	// A broker taking over sees both topics and both offsets.
	_, addr2 := startBroker(t, base, nil)
	cl2 := newClient(t, addr2)
	if got := committedSum(t, cl2, "g"); got != 10+11 {
		t.Fatalf("after takeover: committed offsets sum to %d, want 21", got)
	}
	md := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"t0", "t1"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, mt)
	}
	resp, err := md.RequestWith(ctx, cl2)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range resp.Topics {
		if mt.ErrorCode != 0 || len(mt.Partitions) != 1 {
			t.Fatalf("after takeover: topic %s: error %d, %d partitions", *mt.Topic, mt.ErrorCode, len(mt.Partitions))
		}
	}
}
