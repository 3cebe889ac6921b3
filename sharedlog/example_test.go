package sharedlog_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/sharedlog"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
)

// A broker's Produce, Fetch and ListOffsets on one partition; then a new
// owner takes over with a higher leader epoch.
func Example() {
	ctx := context.Background()
	store := memory.New(memory.Config{Namespace: "example"})
	defer store.Close()

	l, err := sharedlog.Open(ctx, store, "orders-0", sharedlog.Options{Epoch: 1})
	if err != nil {
		panic(err)
	}
	batch := sharedlogtest.Build(sharedlogtest.BatchSpec{Records: 3, Timestamp: 1_700_000_000_000, TimestampStep: 10,
		Idempotent: true, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0})
	retry := sharedlogtest.Clone(batch)
	res, err := l.Append(ctx, batch, sharedlog.AppendOptions{})
	fmt.Println("produce:", res.BaseOffset, res.LastOffset, err)
	res, err = l.Append(ctx, retry, sharedlog.AppendOptions{})
	fmt.Println("retry:", res.BaseOffset, res.Duplicate, err)

	read, _ := l.Read(ctx, 1, sharedlog.ReadOptions{MaxBytes: 1 << 20})
	fmt.Println("fetch:", len(read.Batches), "batch, high watermark", read.HighWatermark)
	at, _ := l.ListOffsets(ctx, 1_700_000_000_015, sharedlog.ReadUncommitted)
	fmt.Println("offset for time:", at.Offset)

	next, _ := sharedlog.Open(ctx, store, "orders-0", sharedlog.Options{Epoch: 2})
	defer next.Close()
	_, err = l.Append(ctx, sharedlogtest.Build(sharedlogtest.BatchSpec{Timestamp: 1}), sharedlog.AppendOptions{})
	fmt.Println("old owner:", errors.Is(err, kerr.NotLeaderForPartition))
	epoch, end := next.OffsetForLeaderEpoch(1)
	fmt.Println("epoch 1 ends at:", epoch, end)
	_ = l.Close()
	// Output:
	// produce: 0 2 <nil>
	// retry: 0 true <nil>
	// fetch: 1 batch, high watermark 3
	// offset for time: 2
	// old owner: true
	// epoch 1 ends at: 1 3
}
