package nfs

import (
	"context"
	"testing"

	"github.com/stratastream/strata/conformance/storagetest"
	"github.com/stratastream/strata/stream/chunked"
)

// TestStorage runs the chunked.Storage conformance suite on directories
// under the nfs testbed, with put-if-absent races between OS processes.
func TestStorage(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		Open: func(ctx context.Context, config []byte) (chunked.Storage, error) {
			return openStorage(ctx, config)
		},
		NewConfig: func(t *testing.T) []byte { return configFor(freshRoot(t)) },
	})
}
