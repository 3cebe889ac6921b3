package broker

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/drivers/memory"
)

// TestMaxConnections: with MaxConnections 3, a fourth connection is closed
// before anything is read, the three keep working, and once one of them
// closes a new connection is served.
func TestMaxConnections(t *testing.T) {
	st, err := memory.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	_, addr := startBroker(t, st, func(c *Config) { c.MaxConnections = 3 })
	var open []net.Conn
	for i := 0; i < 3; i++ {
		c := dial(t, addr)
		if _, err := c.Write(rawFrame(18, 0, int32(i), nil)); err != nil {
			t.Fatal(err)
		}
		readFrame(t, c) // served, so registered before the next dial
		open = append(open, c)
	}
	over := dial(t, addr)
	_, _ = over.Write(rawFrame(18, 0, 99, nil))
	expectClosed(t, over)
	_ = open[0].Close()
	// The broker forgets the closed connection asynchronously: retry until
	// a new one is served (the test's deadline bounds it).
	for i := 0; ; i++ {
		c := dial(t, addr)
		_, _ = c.Write(rawFrame(18, 0, 7, nil))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var sz [4]byte
		if _, err := c.Read(sz[:]); err == nil {
			break
		}
		_ = c.Close()
		if i > 1000 {
			t.Fatal("no connection served after one of three closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInflightPerConnection: a client that pipelines 400 long-polling
// Fetch requests on one connection gets at most maxInflightPerConn of them
// handled at once (the rest wait unread), so one connection cannot make the
// broker start unbounded work. Counted by goroutines: each request being
// handled holds one.
func TestInflightPerConnection(t *testing.T) {
	st, err := memory.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	_, addr := startBroker(t, st, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "inflight", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	c := dial(t, addr)
	baseline := runtime.NumGoroutine()
	const requests = 400
	var frames []byte
	for i := 0; i < requests; i++ {
		req := kmsg.NewFetchRequest()
		req.Version = 4
		req.ReplicaID = -1
		req.MaxWaitMillis = 60000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic = "inflight"
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = 0
		p.FetchOffset = 1 // the end: a long poll
		p.PartitionMaxBytes = 1 << 20
		tp.Partitions = append(tp.Partitions, p)
		req.Topics = append(req.Topics, tp)
		frames = append(frames, rawFrame(1, 4, int32(i), req.AppendTo(nil))...)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	// Wait until the broker has taken up as many as it will, then watch
	// that it takes no more while they are all parked.
	limit := maxInflightPerConn + 2 // the queue, the one being written, the one being decoded
	slack := 40                     // goroutines of the broker and runtime that come and go
	peak := 0
	for peak < maxInflightPerConn {
		peak = max(peak, runtime.NumGoroutine()-baseline)
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 100; i++ {
		peak = max(peak, runtime.NumGoroutine()-baseline)
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("peak %d goroutines above the baseline", peak)
	if peak > limit+slack {
		t.Fatalf("%d goroutines above the baseline with %d requests parked on one connection; want at most %d+%d", peak, requests, limit, slack)
	}
	// Release them: new data answers every long poll, in order.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "inflight", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < requests; i++ {
		resp := readFrame(t, c)
		if corr := int32(binary.BigEndian.Uint32(resp)); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
}
