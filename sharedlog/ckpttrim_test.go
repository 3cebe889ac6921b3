package sharedlog_test

import (
	"context"
	"testing"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// TestCheckpointTrimsMetaEvery8: the metadata stream is trimmed to the
// latest checkpoint once it holds 8 since its last trim, not after each;
// a reopen takes the latest checkpoint of the untrimmed ones.
func TestCheckpointTrimsMetaEvery8(t *testing.T) {
	ctx := context.Background()
	store := memory.New(memory.Config{})
	defer store.Close()
	metaStart := func() int64 {
		t.Helper()
		st, err := store.Open(ctx, "p"+sharedlog.MetaSuffix, stream.OpenOptions{Mode: stream.ModeReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return st.StartOffset()
	}
	l, err := sharedlog.Open(ctx, store, "p", sharedlog.Options{Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 11; i++ {
		if _, err := l.Append(ctx, sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 1}), sharedlog.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := l.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		switch start := metaStart(); {
		case i < 8 && start != 0:
			t.Fatalf("after %d checkpoints the metadata stream starts at %d; want untrimmed", i, start)
		case i >= 8 && start == 0:
			t.Fatalf("after %d checkpoints the metadata stream is still untrimmed", i)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := sharedlog.Open(ctx, store, "p", sharedlog.Options{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rs := l2.Recovery(); rs.CheckpointNext != 11 {
		t.Fatalf("reopen recovered from the checkpoint at %d; want the latest, 11", rs.CheckpointNext)
	}
}
