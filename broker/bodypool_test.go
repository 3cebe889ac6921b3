package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/wal"
)

func TestBodyClass(t *testing.T) {
	for n, want := range map[int]int{
		0: -1, minPooledBody - 1: -1, minPooledBody: 0, minPooledBody + 1: 1,
		100 << 10: 1, 1 << 20: 4, maxPooledBody: 8, maxPooledBody + 1: -1,
	} {
		if got := bodyClass(n); got != want {
			t.Errorf("bodyClass(%d) = %d, want %d", n, got, want)
		}
	}
	b := getBody(100 << 10)
	if len(b) != 100<<10 || cap(b) != 128<<10 {
		t.Fatalf("getBody(100 KiB): len %d cap %d, want 102400 and 131072", len(b), cap(b))
	}
	putBody(b)
	putBody(make([]byte, 100<<10)) // not a pool's size: dropped
	if b := getBody(70 << 10); len(b) != 70<<10 || cap(b) != 128<<10 {
		t.Fatalf("getBody(70 KiB): len %d cap %d, want 71680 and 131072", len(b), cap(b))
	}
}

// TestProducePooledBodiesIntact: records read into pooled buffers are
// given back only once their append completed, so that buffers reused by
// later requests never change what an earlier one stored. The stream set
// holds each append for its 20 ms linger before copying it into a WAL
// batch, while many requests are in flight.
func TestProducePooledBodiesIntact(t *testing.T) {
	ctx := context.Background()
	mem, err := memory.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := wal.NewStore(mem, wal.Options{Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := stream.NewStore(ws)
	t.Cleanup(func() { st.Close() }) // after the broker's
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr, kgo.ProducerBatchCompression(kgo.NoCompression())) // batches of their records' size
	createTopic(t, cl, "pooled", 4, nil)
	before := bodiesReused.Load()
	const n = 600
	acked := produceN(t, cl, "pooled", n, 20<<10)
	if len(acked) != n {
		t.Fatalf("acked %d of %d", len(acked), n)
	}
	if bodiesReused.Load() == before {
		t.Fatal("no Produce body buffer was reused: the test does not exercise the pools")
	}
	checkConsumed(t, acked, consumeAll(t, addr, "pooled", n))
}
