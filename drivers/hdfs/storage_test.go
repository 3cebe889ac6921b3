package hdfs

import (
	"context"
	"testing"

	"github.com/stratastream/strata/conformance/storagetest"
	"github.com/stratastream/strata/stream/chunked"
)

// TestStorage runs the chunked.Storage suite against the HDFS testbed,
// with racing put-if-absent writers in separate processes.
func TestStorage(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		Open: func(ctx context.Context, config []byte) (chunked.Storage, error) {
			return OpenStorage(ctx, config)
		},
		NewConfig: func(t *testing.T) []byte { return marshal(t, freshConfig(t)) },
	})
}
