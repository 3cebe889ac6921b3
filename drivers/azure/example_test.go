package azure_test

import (
	"context"
	"fmt"
	"log"

	"github.com/stratastream/strata/drivers/azure"
	"github.com/stratastream/strata/stream"
)

func ExampleParseConfig() {
	cfg, err := azure.ParseConfig([]byte(`
account_url: https://myaccount.blob.core.windows.net
container: strata
prefix: prod/cluster-a
engine:
  linger: 2ms
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Container, cfg.Prefix, cfg.Engine.Linger)

	_, err = azure.ParseConfig([]byte("account_url: https://myaccount.blob.core.windows.net\ncontainer: Strata\n"))
	fmt.Println(err)
	// Output:
	// strata prod/cluster-a 2ms
	// stream: invalid argument: azure config: container: "Strata": byte 'S' at 0 is not in [a-z0-9-]
}

// Open a store on Azurite and append to a stream. (Needs a running
// Azurite: see testbed/up azurite.)
func ExampleOpen() {
	ctx := context.Background()
	store, err := azure.Open(ctx, []byte(`
account_url: http://127.0.0.1:10000/devstoreaccount1
container: strata
credentials:
  account_key: Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
`))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	s, err := store.Open(ctx, "orders/p0", stream.OpenOptions{Epoch: 1, CreateIfMissing: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	base, err := stream.Append(ctx, s, stream.Batch{Count: 1, Payload: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended at", base)
}
