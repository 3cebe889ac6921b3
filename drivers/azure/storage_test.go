package azure

import (
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestStorage runs the chunked.Storage suite against Azurite, with racing
// put-if-absent writers in separate processes.
func TestStorage(t *testing.T) {
	drivertest.RunStorage(t, opener.OpenStorage, func(t *testing.T) []byte { return marshal(t, freshConfig(t)) })
}
