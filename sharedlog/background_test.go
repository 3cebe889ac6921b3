package sharedlog_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
)

// TestBackgroundWork checks, on a fake clock, that the background goroutine
// applies time retention every RetentionCheckInterval and checkpoints every
// CheckpointInterval, and that Close stops it (synctest fails the test if a
// goroutine of the bubble outlives it).
func TestBackgroundWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ns := fmt.Sprintf("background-%d", nsSeq.Add(1))
		store := memory.New(memory.Config{Namespace: ns})
		defer store.Close()
		opts := sharedlog.Options{Epoch: 1, RetentionTime: time.Hour, RetentionCheckInterval: time.Minute, CheckpointInterval: 10 * time.Minute}
		l, err := sharedlog.Open(ctx, store, "p", opts)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for i, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 30 * time.Minute} {
			b := sharedlogtest.Build(sharedlogtest.BatchSpec{Timestamp: now.Add(-age).UnixMilli(), Tag: string(rune('a' + i))})
			if _, err := l.Append(ctx, b, sharedlog.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := l.LogStartOffset(); got != 0 {
			t.Fatalf("retention ran before its interval: log start %d", got)
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if got := l.LogStartOffset(); got != 2 {
			t.Fatalf("log start %d after the first retention check, want 2", got)
		}
		// 10 minutes in, the interval checkpoint has been written: a reopen
		// (which fences l) replays nothing.
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		l2, err := sharedlog.Open(ctx, memory.New(memory.Config{Namespace: ns}), "p", sharedlog.Options{Epoch: 2})
		if err != nil {
			t.Fatal(err)
		}
		if rs := l2.Recovery(); rs.CheckpointNext != 3 || rs.ReplayedBatches != 0 {
			t.Fatalf("recovery %+v: want the interval checkpoint at 3 and nothing replayed", rs)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("close of the fenced log: %v", err)
		}
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBackgroundStopsWhenFenced: once a newer owner opened the partition,
// the old owner's background goroutine logs the fence once and stops,
// rather than logging a skipped checkpoint every CheckpointInterval for as
// long as the process runs.
func TestBackgroundStopsWhenFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New(memory.Config{Namespace: fmt.Sprintf("background-%d", nsSeq.Add(1))})
		defer store.Close()
		var logs bytes.Buffer // read once Close stopped the writer
		old, err := sharedlog.Open(ctx, store, "p", sharedlog.Options{Epoch: 1, CheckpointInterval: time.Minute,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		newer, err := sharedlog.Open(ctx, store, "p", sharedlog.Options{Epoch: 2})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		_ = old.Close()
		_ = newer.Close()
		if n := strings.Count(logs.String(), "newer owner"); n != 1 {
			t.Errorf("the fenced log wrote %d lines about the newer owner in 30 checkpoint intervals, want 1:\n%s", n, logs.String())
		}
	})
}
