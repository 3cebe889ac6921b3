package broker

import (
	"cmp"
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/wal"
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

// raceStore runs before() once, just before the first Open of the stream
// named at, then opens it: another broker's whole start between this
// broker's epoch allocation and its catalog open.
type raceStore struct {
	stream.DriverStore
	at     string
	once   sync.Once
	before func()
}

func (s *raceStore) Open(ctx context.Context, name string, o stream.OpenOptions) (stream.DriverStream, error) {
	if name == s.at {
		s.once.Do(s.before)
	}
	return s.DriverStore.Open(ctx, name, o)
}

// TestStartLostToNewerBroker: a broker that loses a simultaneous start (a
// newer broker allocated the next epoch and opened the catalog first) fails
// New with a *SupersededError that says so in an operator's words, and the
// newer broker serves.
func TestStartLostToNewerBroker(t *testing.T) {
	dir := t.TempDir()
	var winner *Broker
	st := &raceStore{DriverStore: nfsStore(t, dir).Driver(), at: "strata/__topics", before: func() {
		var err error
		winner, err = New(context.Background(), Config{Store: nfsStore(t, dir), Advertise: "127.0.0.1:1", Logger: testLogger(t)})
		if err != nil {
			t.Errorf("the newer broker's New: %v", err)
		}
	}}
	_, err := New(context.Background(), Config{Store: stream.NewStore(st), Advertise: "127.0.0.1:1", Logger: testLogger(t)})
	if winner != nil {
		defer winner.Close()
	}
	var se *SupersededError
	if !errors.As(err, &se) || !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("New that lost the start: %v; want a *SupersededError matching stream.ErrFenced", err)
	}
	if want := "another broker (epoch 2) took over cluster strata while this broker (epoch 1) was starting"; err.Error() != want {
		t.Fatalf("New that lost the start: %q, want %q", err.Error(), want)
	}
	if winner == nil || winner.Epoch() != 2 || !winner.Ready() {
		t.Fatalf("the newer broker does not serve")
	}
}

// TestSupersededAfterTakeover: a broker taken over while it serves closes
// Superseded, and Err names the newer broker's epoch.
func TestSupersededAfterTakeover(t *testing.T) {
	dir := t.TempDir()
	a, _ := startBroker(t, nfsStore(t, dir), nil)
	if a.Err() != nil {
		t.Fatalf("Err before a takeover: %v", a.Err())
	}
	b, _ := startBroker(t, nfsStore(t, dir), nil)
	select {
	case <-a.Superseded():
	case <-time.After(30 * time.Second):
		t.Fatal("the old broker did not see the takeover within 30s")
	}
	var se *SupersededError
	if err := a.Err(); !errors.As(err, &se) || se.Newer != b.Epoch() || se.Epoch != a.Epoch() || se.Starting {
		t.Fatalf("Err after the takeover: %#v", err)
	}
	if want := "another broker (epoch 2) took over cluster strata; this broker (epoch 1) no longer owns its partitions"; a.Err().Error() != want {
		t.Fatalf("Err: %q, want %q", a.Err(), want)
	}
}

// TestSupersededOnStreamSets: an idle broker on stream sets learns of a
// takeover from its poll of the broker-epoch stream, a read-only virtual
// stream it keeps open and refreshes (the newer broker's allocation is in
// that broker's WAL).
func TestSupersededOnStreamSets(t *testing.T) {
	dir := t.TempDir()
	sets := func() *stream.Store {
		s, err := wal.NewStore(nfsStore(t, dir), wal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return stream.NewStore(s)
	}
	a, _ := startBroker(t, sets(), nil)
	time.Sleep(3 * a.cfg.FenceCheckInterval) // a few polls on the open session first
	b, _ := startBroker(t, sets(), nil)
	select {
	case <-a.Superseded():
	case <-time.After(30 * time.Second):
		t.Fatal("the old broker did not see the takeover within 30s")
	}
	var se *SupersededError
	if err := a.Err(); !errors.As(err, &se) || se.Newer != b.Epoch() {
		t.Fatalf("Err after the takeover: %#v", err)
	}
}
