package s3_test

import (
	"context"
	"fmt"
	"log"

	"github.com/stratastream/strata/drivers/s3"
	"github.com/stratastream/strata/stream"
)

// A config fits on a command line as an s3:// URL; credentials then come
// from the SDK's default chain.
func ExampleParseConfig() {
	cfg, err := s3.ParseConfig([]byte("s3://my-bucket/strata/prod?endpoint=http://127.0.0.1:9000&path_style=true&linger=5ms"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Bucket, cfg.Prefix, cfg.Endpoint, cfg.PathStyle, cfg.Engine.Linger)

	_, err = s3.ParseConfig([]byte("bucket: my-bucket\ntimeouts: {request: -1s}\n"))
	fmt.Println(err)
	// Output:
	// my-bucket strata/prod http://127.0.0.1:9000 true 5ms
	// stream: invalid argument: s3 config: timeouts.request: negative duration -1s
}

// Open a store on a bucket and append a batch.
func ExampleOpen() {
	ctx := context.Background()
	store, err := s3.Open(ctx, []byte(`
bucket: my-bucket
prefix: strata/
region: eu-west-1
`))
	if err != nil {
		log.Fatal(err) // names the bad setting: bucket, credentials, endpoint...
	}
	defer store.Close()
	s, err := store.Open(ctx, "orders/3", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
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
