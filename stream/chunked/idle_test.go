package chunked

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

// TestIdleSessionsPark: read-write sessions that have appended and trimmed
// and then sit idle hold no goroutine, and a parked session still appends,
// trims, reads and closes, and a store with parked sessions closes.
func TestIdleSessionsPark(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t, NewMemStorage(), Options{})
	base := runtime.NumGoroutine()
	const n = 40
	ws := make([]*stream.Stream, n)
	for i := range ws {
		ws[i] = mustOpen(t, s, fmt.Sprintf("idle-%d", i), 1)
		for j := range 2 {
			if _, err := stream.Append(ctx, ws[i], stream.Batch{Count: 1, Payload: payload(j)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := ws[i].Trim(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	waitGoroutines(t, base, n)
	for i, w := range ws {
		r, err := stream.Append(ctx, w, stream.Batch{Count: 1, Payload: payload(2)})
		if err != nil || r.BaseOffset != 2 {
			t.Fatalf("stream %d: append after parking: offset %d, %v; want 2", i, r.BaseOffset, err)
		}
		if got := fetchAll(t, w, 1); len(got) != 2 || string(got[1].Payload) != string(payload(2)) {
			t.Fatalf("stream %d: read %d batches after parking, want 2", i, len(got))
		}
	}
	waitGoroutines(t, base, n)
	for _, w := range ws[:n/2] {
		if err := w.Close(); err != nil {
			t.Fatalf("close of a parked session: %v", err)
		}
	}
	if err := ws[n-1].Trim(ctx, 2); err != nil {
		t.Fatalf("trim of a parked session: %v", err)
	}
	// The rest stay open: the store's Close (Cleanup) ends them, and goleak
	// checks that nothing outlives it.
}

// waitGoroutines waits (up to 10 s) until the process runs no more
// goroutines than base, and fails naming how many n idle sessions hold.
func waitGoroutines(t *testing.T, base, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle sessions hold %d goroutines, want none", n, runtime.NumGoroutine()-base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
