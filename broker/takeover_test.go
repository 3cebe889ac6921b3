package broker

import (
	"cmp"
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupConsumerSurvivesTakeover: a group consumer reading through broker
// A carries on through broker B, which takes over the same storage and
// address: it rejoins the group, resumes from the committed offsets and
// reads every record.
func TestGroupConsumerSurvivesTakeover(t *testing.T) {
	dir := t.TempDir()
	a, addr := startBroker(t, nfsStore(t, dir), nil)
	admin := newClient(t, addr)
	createTopic(t, admin, "gt", 3, nil)
	const n = 3000
	acked := produceN(t, admin, "gt", n, 40)
	admin.Close()

	cl := newClient(t, addr, kgo.ConsumerGroup("gt-group"), kgo.ConsumeTopics("gt"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxBytes(16<<10), kgo.RetryTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	got := map[[2]int64]record{}
	poll := func() {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			mu.Lock()
			got[[2]int64{int64(r.Partition), r.Offset}] = record{r.Partition, r.Offset, r.Key, r.Value}
			mu.Unlock()
		})
		_ = cl.CommitUncommittedOffsets(ctx) // may fail across the takeover: records are then read again
	}
	for len(got) < n/3 {
		poll()
		if ctx.Err() != nil {
			t.Fatalf("consumed %d before the takeover", len(got))
		}
	}
	before := len(got)

	// B takes over; A stops (as a crashed broker would) and B serves on
	// A's address.
	st := nfsStore(t, dir)
	b, err := New(context.Background(), Config{Store: st, Advertise: addr, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	_ = a.Close()
	var ln net.Listener
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on %s for broker B: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() { _ = b.Serve(ln) }()

	for len(got) < n {
		poll()
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d (%d before the takeover)", len(got), n, before)
		}
	}
	var all []record
	for _, r := range got {
		all = append(all, r)
	}
	checkConsumedSet(t, acked, all)
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through broker B: %v", err)
	}
	if sum := committedSum(t, newClient(t, addr), "gt-group"); sum != n {
		t.Fatalf("committed offsets through broker B sum to %d, want %d", sum, n)
	}
}

// checkConsumedSet asserts got (in no particular order) holds exactly the
// acked records, byte for byte.
func checkConsumedSet(t *testing.T, acked, got []record) {
	t.Helper()
	byPart := map[int32][]record{}
	for _, r := range got {
		byPart[r.partition] = append(byPart[r.partition], r)
	}
	var ordered []record
	for _, rs := range byPart {
		slices.SortFunc(rs, func(x, y record) int { return cmp.Compare(x.offset, y.offset) })
		ordered = append(ordered, rs...)
	}
	checkConsumed(t, acked, ordered)
}
