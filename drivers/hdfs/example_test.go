package hdfs_test

import (
	"context"
	"fmt"
	"log"

	"github.com/stratastream/strata/drivers/hdfs"
	"github.com/stratastream/strata/stream"
)

func ExampleParseConfig() {
	cfg, err := hdfs.ParseConfig([]byte(`
namenodes: [nn1.example.com:8020, nn2.example.com:8020]
user: strata
root: /strata/prod
engine:
  linger: 2ms
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.NameNodes, cfg.Root, cfg.Engine.Linger)

	cfg, err = hdfs.ParseConfig([]byte("hdfs://nn1.example.com:8020/strata?user=strata&replication=3"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.NameNodes, cfg.Root, cfg.User, cfg.Replication)

	_, err = hdfs.ParseConfig([]byte("namenodes: [nn1.example.com]\nuser: strata\n"))
	fmt.Println(err)
	// Output:
	// [nn1.example.com:8020 nn2.example.com:8020] /strata/prod 2ms
	// [nn1.example.com:8020] /strata strata 3
	// stream: invalid argument: hdfs config: namenodes: "nn1.example.com" is not host:port
}

// Open a store on HDFS and append to a stream. (Needs a running cluster:
// see testbed/up hdfs, which prints the config file to use.)
func ExampleOpen() {
	ctx := context.Background()
	store, err := hdfs.Open(ctx, []byte("hdfs://127.0.0.1:8020/strata?user=strata"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	s, err := store.Open(ctx, "orders/p0", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	res, err := stream.Append(ctx, s, stream.Batch{Count: 1, Payload: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended at", res.BaseOffset)
}
