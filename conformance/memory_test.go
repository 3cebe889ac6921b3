package conformance_test

import (
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/conformance/internal/broken"
)

// TestMemoryInProcess runs the whole suite on the healthy memory driver
// in-process (Second and Crash open stores on the same namespace).
func TestMemoryInProcess(t *testing.T) {
	conformance.Run(t, broken.Harness(broken.None))
}
