package stream_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/stream"
)

// Appends are pipelined: start many, then wait for their acknowledgements,
// which complete in order.
func Example() {
	ctx := context.Background()
	store := memory.New(memory.Config{})
	defer store.Close()

	s, err := store.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	var futures []*stream.AppendFuture
	for i := range 3 {
		futures = append(futures, s.Append(ctx, stream.Batch{Count: 2, Payload: fmt.Appendf(nil, "batch %d", i)}))
	}
	for _, f := range futures {
		r, err := f.Wait(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println("acked at", r.BaseOffset)
	}

	batches, err := s.Fetch(ctx, 3, stream.NoEnd, 0)
	if err != nil {
		panic(err)
	}
	for _, b := range batches {
		fmt.Printf("[%d, %d) %s\n", b.BaseOffset, b.EndOffset(), b.Payload)
	}
	// Output:
	// acked at 0
	// acked at 2
	// acked at 4
	// [2, 4) batch 1
	// [4, 6) batch 2
}

// A read-write open with a higher epoch fences the older owner.
func ExampleStore_Open_fencing() {
	ctx := context.Background()
	store := memory.New(memory.Config{})
	old, _ := store.Open(ctx, "t/0", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	_, _ = stream.Append(ctx, old, stream.Batch{Count: 1, Payload: []byte("a")})

	owner, _ := store.Open(ctx, "t/0", stream.OpenOptions{Epoch: 2})
	_, err := stream.Append(ctx, old, stream.Batch{Count: 1, Payload: []byte("b")})
	fmt.Println(errors.Is(err, stream.ErrFenced), owner.NextOffset())

	_, err = store.Open(ctx, "t/0", stream.OpenOptions{Epoch: 1})
	fmt.Println(errors.Is(err, stream.ErrFenced))
	// Output:
	// true 1
	// true
}

func ExampleValidateName() {
	for _, n := range []string{"orders-3/log", "../etc", "/abs", "a//b", "ok.name_1"} {
		fmt.Println(n, stream.ValidateName(n) == nil)
	}
	// Output:
	// orders-3/log true
	// ../etc false
	// /abs false
	// a//b false
	// ok.name_1 true
}
