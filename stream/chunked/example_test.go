package chunked_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// A backend implements chunked.Storage; the engine turns it into a
// stream.Store. Here the Storage is the in-memory one.
func ExampleNewStore() {
	ctx := context.Background()
	store, err := chunked.NewStore(chunked.NewMemStorage(), chunked.Options{Driver: "example"})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	w, err := store.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		panic(err)
	}
	first := w.Append(ctx, stream.Batch{Count: 2, Payload: []byte("a,b")})
	second := w.Append(ctx, stream.Batch{Count: 1, Payload: []byte("c")})
	r1, _ := first.Result()
	r2, _ := second.Result()
	fmt.Println("acked at", r1.BaseOffset, "and", r2.BaseOffset)

	// A newer owner (a higher epoch) fences the first one.
	w2, err := store.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 2})
	if err != nil {
		panic(err)
	}
	_, err = stream.Append(ctx, w, stream.Batch{Count: 1, Payload: []byte("late")})
	fmt.Println("old owner fenced:", errors.Is(err, stream.ErrFenced))
	batches, _ := w2.Fetch(ctx, 0, stream.NoEnd, 0)
	for _, b := range batches {
		fmt.Printf("%d %s\n", b.BaseOffset, b.Payload)
	}
	// Output:
	// acked at 0 and 2
	// old owner fenced: true
	// 0 a,b
	// 2 c
}
