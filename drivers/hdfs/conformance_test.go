package hdfs

import (
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// conformanceRun is the suite on the HDFS testbed under a fresh root that
// the stores of the run share (cases use names of their own under it); the
// fault family stops and starts the whole cluster (NameNode and DataNode).
func conformanceRun(t *testing.T) drivertest.Conformance {
	return drivertest.Conformance{
		Driver:     DriverName,
		Open:       Open,
		Config:     marshal(t, freshConfig(t)),
		BackendCtl: drivertest.BackendCtl("hdfs"),
	}
}

// dataNodeCtl is the fault family's command to stop and start only the
// DataNode: "stop" and "start" become stop-datanode and start-datanode.
func dataNodeCtl() string {
	return "f() { " + drivertest.BackendCtl("hdfs") + ` "$1-datanode"; }; f`
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

// TestFaultDataNodeOnly: the fault family again, with only the DataNode
// stopped (the NameNode stays up and answers): appends fail ErrUnavailable
// within the bound, and after the DataNode restarts every acked batch is
// there. A skipped case fails this test.
func TestFaultDataNodeOnly(t *testing.T) {
	c := conformanceRun(t)
	c.BackendCtl = dataNodeCtl()
	h := c.InProcess(t)
	cases, err := conformance.Select(conformance.Cases(), "^fault/")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no fault cases: %v", err)
	}
	for _, c := range cases {
		t.Run(c.FullName(), func(t *testing.T) {
			r := conformance.RunCase(t.Context(), h, c, conformance.RunOptions{})
			for _, l := range r.Log {
				t.Log(l)
			}
			if r.Status != conformance.StatusPass {
				t.Fatalf("%s: %s: %s", c.FullName(), r.Status, r.Error)
			}
		})
	}
}
