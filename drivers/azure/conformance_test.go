package azure

import (
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestMain stops any driver process a failed test left and removes the
// plugin binary.
func TestMain(m *testing.M) { drivertest.Main(m) }

// conformanceRun is the suite on Azurite: the stores of one run share one
// fresh prefix (cases use names of their own under it).
func conformanceRun(t *testing.T) drivertest.Conformance {
	return drivertest.Conformance{
		Driver:     DriverName,
		Open:       Open,
		Config:     marshal(t, freshConfig(t)),
		BackendCtl: drivertest.BackendCtl("azurite"),
	}
}

// TestConformanceInProcess: the stream suite on the driver linked in; the
// second writer of fencing cases is another OS process; a crash drops the
// Store without Close.
func TestConformanceInProcess(t *testing.T) { conformanceRun(t).RunInProcess(t) }

// TestConformanceStreamSets runs the stream and SharedLog suites on
// virtual streams (stream/wal) over the driver linked in.
func TestConformanceStreamSets(t *testing.T) { conformanceRun(t).RunStreamSets(t) }

// TestConformanceOutOfProcess: the stream suite on the plugin binary; each
// store is its own driver process, and a crash is SIGKILL.
func TestConformanceOutOfProcess(t *testing.T) { conformanceRun(t).RunOutOfProcess(t) }
