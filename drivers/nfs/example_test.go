package nfs_test

import (
	"context"
	"fmt"
	"os"

	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/stream"
)

// The driver on a local directory: open the store, append, read back.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "strata-nfs-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := nfs.Open(ctx, []byte("root: "+dir+"\nlinger: 1ms\n"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	st, err := store.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	r, err := stream.Append(ctx, st, stream.Batch{Count: 2, Payload: []byte("two records")})
	if err != nil {
		panic(err)
	}
	bs, err := st.Fetch(ctx, 0, stream.NoEnd, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.BaseOffset, r.NextOffset, len(bs), string(bs[0].Payload))
	// Output: 0 2 1 two records
}
