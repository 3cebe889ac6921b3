package nfs

import (
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestStorage runs the chunked.Storage conformance suite on directories
// under the nfs testbed, with put-if-absent races between OS processes.
func TestStorage(t *testing.T) {
	drivertest.RunStorage(t, openStorage, func(t *testing.T) []byte { return configFor(freshRoot(t)) })
}
