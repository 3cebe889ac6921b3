package azure

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// baseConfig is the driver config `testbed/up azurite` wrote. It fails the
// test (never skips) when Azurite cannot be started.
func baseConfig(t testing.TB) Config {
	t.Helper()
	return drivertest.TestbedConfig(t, "azurite", "STRATA_AZURE_CONFIG", ParseConfig)
}

// freshConfig returns the testbed config under a new prefix that no other
// test uses, and removes the prefix's blobs when t ends.
func freshConfig(t testing.TB) Config {
	t.Helper()
	cfg := baseConfig(t)
	cfg.Prefix = "test/" + rand.Text() + "/"
	t.Cleanup(func() {
		drivertest.DeleteAll(t, cfg.Prefix, func(ctx context.Context) (*Storage, error) { return OpenStorage(ctx, cfg) })
	})
	return cfg
}

// marshal renders cfg as the YAML config Open takes.
func marshal(t testing.TB, cfg Config) []byte {
	t.Helper()
	return drivertest.Marshal(t, cfg)
}
