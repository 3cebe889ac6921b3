package nfs

import (
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// conformanceRun is the suite on a fresh directory under the nfs testbed;
// the fault hook moves the directory away and back
// (testbed/ctl nfs --root ROOT stop|start).
func conformanceRun(t *testing.T) drivertest.Conformance {
	root := freshRoot(t)
	return drivertest.Conformance{
		Driver:     DriverName,
		Open:       Open,
		Config:     configFor(root),
		BackendCtl: drivertest.BackendCtl("nfs", "--root", root),
	}
}

// TestConformanceInProcess runs the stream suite on the driver linked in.
// Second stores live in another OS process (the plugin binary) on the same
// directory, so the multi-writer and read-only cases race two processes; a
// crash drops the Store without Close (its goroutines go on as a stale
// writer) and opens a new one.
func TestConformanceInProcess(t *testing.T) { conformanceRun(t).RunInProcess(t) }

// TestConformanceStreamSets runs the stream and SharedLog suites on
// virtual streams (stream/wal) over the driver linked in.
func TestConformanceStreamSets(t *testing.T) { conformanceRun(t).RunStreamSets(t) }

// TestConformanceOutOfProcess runs the stream suite through the plugin
// binary: every Store is its own driver process; Crash SIGKILLs it.
func TestConformanceOutOfProcess(t *testing.T) { conformanceRun(t).RunOutOfProcess(t) }
