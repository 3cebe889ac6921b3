package hdfs

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// TestMain stops any driver process a failed test left and removes the
// plugin binary.
func TestMain(m *testing.M) { drivertest.Main(m) }

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
	st, err := NewStorage(context.Background(), cfg)
	if err != nil {
		t.Errorf("cleanup of %s: %v", cfg.Root, err)
		return
	}
	defer st.Close()
	if err := st.pool.pick().RemoveAll(cfg.Root); err != nil {
		t.Errorf("cleanup of %s: %v", cfg.Root, err)
	}
}
