package nfs

import (
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestMain stops any driver process a failed test left and removes the
// plugin binary.
func TestMain(m *testing.M) { drivertest.Main(m) }
