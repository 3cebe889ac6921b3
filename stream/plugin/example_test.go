package plugin_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

// Open loads a driver binary and uses its Store like an in-process one.
func Example() {
	ctx := context.Background()
	defer plugin.CleanupClients()
	st, err := plugin.Open(ctx, "bin/strata-driver-memory", []byte("namespace: demo"),
		plugin.WithLogger(slog.Default()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	s, err := st.Open(ctx, "orders-3/log", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	res, err := stream.Append(ctx, s, stream.Batch{Count: 1, Payload: []byte("hello")})
	fmt.Println(res.BaseOffset, err)
}

// Start runs one driver process that can hold several Stores.
func ExampleStart() {
	ctx := context.Background()
	c, err := plugin.Start(ctx, "bin/strata-driver-memory")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	a, _ := c.OpenStore(ctx, []byte("namespace: a"))
	b, _ := c.OpenStore(ctx, []byte("namespace: b"))
	fmt.Println(a.Info().Driver, b.Info().Driver, c.Pid() > 0)
}
