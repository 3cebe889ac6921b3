//go:build unix

package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stratastream/strata/stream"
)

func payload(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i*31 + j)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	st := openMemory(t, "")
	if got := st.Info().Driver; got != "memory" {
		t.Fatalf("Info().Driver = %q, want memory", got)
	}
	if err := st.Create(ctx, "orders-3/log"); err != nil {
		t.Fatalf("Create: %v", err)
	}
	names, err := st.List(ctx, "orders")
	if err != nil || len(names) != 1 || names[0] != "orders-3/log" {
		t.Fatalf("List = %v, %v", names, err)
	}
	s, err := st.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	const n = 200
	futures := make([]*stream.AppendFuture, n)
	for i := range futures {
		b := stream.Batch{Count: uint32(i%3 + 1), Timestamp: int64(i), Payload: payload(i, i*7)}
		if i%10 == 0 {
			b.Properties = map[string]string{"k": fmt.Sprint(i), "x": "y"}
		}
		futures[i] = s.Append(ctx, b)
	}
	var next int64
	for i, f := range futures {
		res, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.BaseOffset != next || res.NextOffset != next+int64(i%3+1) {
			t.Fatalf("append %d acked [%d,%d), want base %d", i, res.BaseOffset, res.NextOffset, next)
		}
		next = res.NextOffset
	}
	if s.NextOffset() != next {
		t.Fatalf("NextOffset = %d, want %d", s.NextOffset(), next)
	}
	got, err := s.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if len(got) != n {
		t.Fatalf("Fetch returned %d batches, want %d", len(got), n)
	}
	for i, b := range got {
		if !bytes.Equal(b.Payload, payload(i, i*7)) || b.Timestamp != int64(i) || b.Count != uint32(i%3+1) {
			t.Fatalf("batch %d differs: %+v", i, b)
		}
		if i%10 == 0 && (b.Properties["k"] != fmt.Sprint(i) || b.Properties["x"] != "y" || len(b.Properties) != 2) {
			t.Fatalf("batch %d properties = %v", i, b.Properties)
		}
	}
	// A fetch from the middle of a batch starts with that batch.
	mid, err := s.Fetch(ctx, got[5].BaseOffset+int64(got[5].Count)-1, got[7].BaseOffset, 0)
	if err != nil || len(mid) != 2 || mid[0].BaseOffset != got[5].BaseOffset {
		t.Fatalf("Fetch middle = %d batches, %v", len(mid), err)
	}
	if err := s.Trim(ctx, got[10].BaseOffset); err != nil {
		t.Fatalf("Trim: %v", err)
	}
	if s.StartOffset() != got[10].BaseOffset {
		t.Fatalf("StartOffset = %d, want %d", s.StartOffset(), got[10].BaseOffset)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Append(ctx, stream.Batch{Count: 1}).Wait(ctx); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Fetch(ctx, 0, 1, 0); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("Fetch after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Store.Close: %v", err)
	}
	if err := st.Create(ctx, "x"); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("Create after Store.Close: %v, want ErrClosed", err)
	}
}

// TestSentinelsCrossTheBoundary provokes each sentinel in the driver and
// checks that errors.Is works on the host and the driver's text survives.
func TestSentinelsCrossTheBoundary(t *testing.T) {
	ctx := testCtx(t)
	st := openMemory(t, "")
	if err := st.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	old, err := st.Open(ctx, "s", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Append(ctx, old, stream.Batch{Count: 1, Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Open(ctx, "s", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want error
		text string
		call func() error
	}{
		{"already exists", stream.ErrAlreadyExists, `"s"`, func() error { return st.Create(ctx, "s") }},
		{"not found", stream.ErrNotFound, "missing", func() error {
			_, err := st.Open(ctx, "missing", stream.OpenOptions{Epoch: 1})
			return err
		}},
		{"invalid name", stream.ErrInvalidArgument, "..", func() error { return st.Create(ctx, "a/../b") }},
		{"fenced append", stream.ErrFenced, "epoch", func() error {
			_, err := stream.Append(ctx, old, stream.Batch{Count: 1})
			return err
		}},
		{"fenced open", stream.ErrFenced, "", func() error {
			_, err := st.Open(ctx, "s", stream.OpenOptions{Epoch: 1})
			return err
		}},
		{"offset out of range", stream.ErrOffsetOutOfRange, "", func() error {
			_, err := cur.Fetch(ctx, 5, stream.NoEnd, 0)
			return err
		}},
		{"trim out of range", stream.ErrOffsetOutOfRange, "", func() error { return cur.Trim(ctx, 99) }},
		{"empty batch", stream.ErrInvalidArgument, "count", func() error {
			_, err := stream.Append(ctx, cur, stream.Batch{Count: 0})
			return err
		}},
		{"batch too large", stream.ErrBatchTooLarge, "limit", func() error {
			_, err := stream.Append(ctx, cur, stream.Batch{Count: 1, Payload: make([]byte, st.Info().MaxBatchBytes+1)})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if got := stream.Sentinel(err); got != tc.want {
				t.Fatalf("Sentinel = %v, want %v", got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want.Error()) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("message %q lost the driver's text (want %q and %q)", err, tc.want, tc.text)
			}
		})
	}
	// After an oversized batch failed, the session still appends.
	if _, err := stream.Append(ctx, cur, stream.Batch{Count: 1, Payload: []byte("b")}); err != nil {
		t.Fatalf("append after failures: %v", err)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx := testCtx(t)
	st := openMemory(t, "")
	s, err := st.Open(ctx, "c", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Append(cctx, stream.Batch{Count: 1}).Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with cancelled ctx: %v", err)
	}
	if _, err := s.Fetch(cctx, 0, 1, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch with cancelled ctx: %v", err)
	}
	if err := st.Create(cctx, "d"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create with cancelled ctx: %v", err)
	}
	if s.NextOffset() != 0 {
		t.Fatalf("NextOffset = %d after cancelled appends, want 0", s.NextOffset())
	}
	res, err := stream.Append(ctx, s, stream.Batch{Count: 1})
	if err != nil || res.BaseOffset != 0 {
		t.Fatalf("append after cancelled ones: %+v, %v (no offset may be used)", res, err)
	}
}

func TestFetch64MiB(t *testing.T) {
	ctx := testCtx(t)
	st := openMemory(t, "")
	s, err := st.Open(ctx, "big", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	// Eight 8 MiB batches: each is larger than gRPC's default 4 MiB message.
	size := st.Info().MaxBatchBytes
	n := (64 << 20) / size
	futures := make([]*stream.AppendFuture, n)
	for i := range futures {
		futures[i] = s.Append(ctx, stream.Batch{Count: 1, Payload: payload(i, size)})
	}
	for i, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	got, err := s.Fetch(ctx, 0, stream.NoEnd, 64<<20)
	if err != nil {
		t.Fatalf("Fetch 64 MiB: %v", err)
	}
	total := 0
	for i, b := range got {
		if !bytes.Equal(b.Payload, payload(i, size)) {
			t.Fatalf("batch %d differs", i)
		}
		total += len(b.Payload)
	}
	if total != 64<<20 {
		t.Fatalf("fetched %d bytes, want %d", total, 64<<20)
	}
}

func TestStoresShareNamespaceInOneProcess(t *testing.T) {
	ctx := testCtx(t)
	c := startMemory(t)
	a, err := c.OpenStore(ctx, []byte("namespace: shared"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.OpenStore(ctx, []byte(`{"namespace": "shared"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Create(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, "x"); !errors.Is(err, stream.ErrAlreadyExists) {
		t.Fatalf("second store Create: %v, want ErrAlreadyExists", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing one store leaves the client and the other store working.
	if names, err := b.List(ctx, ""); err != nil || len(names) != 1 {
		t.Fatalf("List on second store = %v, %v", names, err)
	}
	if _, err := c.OpenStore(ctx, []byte("namespace: [")); !errors.Is(err, stream.ErrInvalidArgument) {
		t.Fatalf("bad config: %v, want ErrInvalidArgument", err)
	}
}

// TestConcurrentAppendersInOrder checks that acks of one session complete
// in call order under concurrent appenders.
func TestConcurrentAppendersInOrder(t *testing.T) {
	ctx := testCtx(t)
	st := openMemory(t, "")
	s, err := st.Open(ctx, "p", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var futures []*stream.AppendFuture
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				mu.Lock()
				futures = append(futures, s.Append(ctx, stream.Batch{Count: 1, Payload: payload(i, 100)}))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, f := range futures {
		res, err := f.Wait(ctx)
		if err != nil || res.BaseOffset != int64(i) {
			t.Fatalf("append %d: %+v, %v", i, res, err)
		}
		// Every earlier future is complete once a later one is.
		for _, e := range futures[:i] {
			select {
			case <-e.Done():
			default:
				t.Fatalf("append %d completed before an earlier one", i)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDataChannel: a driver built on Serve takes the bulk calls on the data
// channel; one that does not serve it (the test's bad driver) gets them on
// the go-plugin connection, and both work.
func TestDataChannel(t *testing.T) {
	c := startMemory(t)
	if c.dataConn == nil {
		t.Fatal("memory driver: no data channel")
	}
	ctx := testCtx(t)
	bad, err := Start(ctx, badBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if bad.dataConn != nil {
		t.Fatal("bad driver: data channel although it serves none")
	}
	st, err := bad.OpenStore(ctx, []byte(`{"Mode":"fine"}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Open(ctx, "s", stream.OpenOptions{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := stream.Append(ctx, s, stream.Batch{Count: 1}); err != nil || res.BaseOffset != 10 {
		t.Fatalf("append over the go-plugin connection: %+v, %v", res, err)
	}
}

// TestCloseWaitsForInflightAppends: Close returns only once every append
// made before it has completed, and they all succeed.
func TestCloseWaitsForInflightAppends(t *testing.T) {
	ctx := testCtx(t)
	st := openMemory(t, "")
	s, err := st.Open(ctx, "w", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	futures := make([]*stream.AppendFuture, 500)
	for i := range futures {
		futures[i] = s.Append(ctx, stream.Batch{Count: 1, Payload: payload(i, 4096)})
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, f := range futures {
		select {
		case <-f.Done():
		default:
			t.Fatalf("append %d still pending after Close returned", i)
		}
		if res, err := f.Result(); err != nil || res.BaseOffset != int64(i) {
			t.Fatalf("append %d: %+v, %v", i, res, err)
		}
	}
	r, err := st.Open(ctx, "w", stream.OpenOptions{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.NextOffset() != int64(len(futures)) {
		t.Fatalf("reopened NextOffset = %d, want %d", r.NextOffset(), len(futures))
	}
}
