package s3

import (
	"testing"
	"time"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestMain stops any driver process a failed test left and removes the
// plugin binary.
func TestMain(m *testing.M) { drivertest.Main(m) }

// unavailableWithin bounds the fault family's wait for ErrUnavailable: the
// testbed config's timeouts.operation plus the engine's retry of a failed
// put and slack for a loaded machine.
func unavailableWithin(cfg Config) time.Duration {
	return 2*cfg.withDefaults().Timeouts.Operation + 10*time.Second
}

// conformanceRun is the suite on MinIO under a fresh prefix; the fault
// family stops and restarts MinIO.
func conformanceRun(t *testing.T) drivertest.Conformance {
	cfg := minioConfig(t)
	return drivertest.Conformance{
		Driver:            DriverName,
		Open:              Open,
		Config:            marshalConfig(t, cfg),
		BackendCtl:        drivertest.BackendCtl("minio"),
		UnavailableWithin: unavailableWithin(cfg),
	}
}

// TestConformanceInProcess: the stream suite on the driver linked in; the
// second writer or reader of fencing and read-only cases is a driver
// process of its own; a crash drops the Store without Close; the fault
// family stops and restarts MinIO.
func TestConformanceInProcess(t *testing.T) { conformanceRun(t).RunInProcess(t) }

// TestConformanceStreamSets runs the stream and SharedLog suites on
// virtual streams (stream/wal) over the driver linked in.
func TestConformanceStreamSets(t *testing.T) { conformanceRun(t).RunStreamSets(t) }

// TestConformanceOutOfProcess: the stream suite on the plugin binary; each
// store is its own driver process (so multi-writer cases race two
// processes), and a crash is SIGKILL.
func TestConformanceOutOfProcess(t *testing.T) { conformanceRun(t).RunOutOfProcess(t) }
