package sharedlog_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream/chunked"
)

// TestIdleLogsHoldNoGoroutine: open partitions on the engine that have
// appended and then sit idle hold no goroutine (the collector runs only
// while appends await acks, the background work waits on a timer); they
// still append and close.
func TestIdleLogsHoldNoGoroutine(t *testing.T) {
	ctx := context.Background()
	store, err := chunked.NewStore(chunked.NewMemStorage(), chunked.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	base := runtime.NumGoroutine()
	const n = 20
	logs := make([]*sharedlog.Log, n)
	for i := range logs {
		if logs[i], err = sharedlog.Open(ctx, store, fmt.Sprintf("idle-%d", i), sharedlog.Options{Epoch: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := logs[i].Append(ctx, sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 2}), sharedlog.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle partitions hold %d goroutines, want none", n, runtime.NumGoroutine()-base)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitIdle()
	for i, l := range logs {
		r, err := l.Append(ctx, sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1}), sharedlog.AppendOptions{})
		if err != nil || r.BaseOffset != 2 {
			t.Fatalf("partition %d: append after idling: offset %d, %v; want 2", i, r.BaseOffset, err)
		}
	}
	waitIdle()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
