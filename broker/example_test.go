package broker_test

import (
	"context"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/drivers/memory"
)

// Example runs a broker on the memory driver and produces one record to it
// with a Kafka client.
func Example() {
	ctx := context.Background()
	store, err := memory.Open(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	b, err := broker.New(ctx, broker.Config{Store: store, Advertise: ln.Addr().String(), AutoCreateTopics: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	go b.Serve(ln)

	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.AllowAutoTopicCreation())
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("hello")}).First()
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s-%d@%d\n", r.Topic, r.Partition, r.Offset)
	// Output: orders-0@0
}
