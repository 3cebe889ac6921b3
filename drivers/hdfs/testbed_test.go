package hdfs

import (
	"context"
	"crypto/rand"
	"testing"

	"go.uber.org/goleak"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestMain stops any driver process a failed test left, removes the
// plugin binary and checks that no goroutine outlives the tests, except
// one that colinmarc/hdfs v2.4.0 leaks by itself: when a DataNode fails a
// block write (the fault and network-fault tests cut it off), the
// client's blockWriteStream.finish returns on the ack error before it
// closes its packet channel, so the goroutine that drains that channel
// (ackPackets) never ends. docs/drivers/hdfs.md lists it.
func TestMain(m *testing.M) {
	drivertest.Main(m, goleak.IgnoreTopFunction("github.com/colinmarc/hdfs/v2/internal/transfer.(*blockWriteStream).ackPackets"))
}

// baseConfig is the driver config `testbed/up hdfs` wrote. It fails the
// test (never skips) when HDFS cannot be started.
func baseConfig(t testing.TB) Config {
	t.Helper()
	return drivertest.TestbedConfig(t, "hdfs", "STRATA_HDFS_CONFIG", ParseConfig)
}

// freshConfig returns the testbed config under a new root that no other
// test uses, and removes that root when t ends.
func freshConfig(t testing.TB) Config {
	t.Helper()
	cfg := baseConfig(t)
	cfg.Root = "/test/" + rand.Text()
	t.Cleanup(func() { wipe(t, cfg) })
	return cfg
}

// marshal renders cfg as the YAML config Open takes.
func marshal(t testing.TB, cfg Config) []byte {
	t.Helper()
	return drivertest.Marshal(t, cfg)
}

// wipe removes cfg's root (the objects, the temp area and the root
// itself).
func wipe(t testing.TB, cfg Config) {
	t.Helper()
	st, err := OpenStorage(context.Background(), cfg)
	if err != nil {
		t.Errorf("cleanup of %s: %v", cfg.Root, err)
		return
	}
	defer st.Close()
	if err := st.pool.pick().RemoveAll(cfg.Root); err != nil {
		t.Errorf("cleanup of %s: %v", cfg.Root, err)
	}
}
