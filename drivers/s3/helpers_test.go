package s3

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// minioConfig returns the MinIO testbed's driver config with a prefix no
// other test uses, and removes every object under that prefix when t ends.
// It fails t (never skips) when MinIO cannot be started.
func minioConfig(t testing.TB) Config {
	t.Helper()
	cfg := drivertest.TestbedConfig(t, "minio", "STRATA_S3_CONFIG", ParseConfig)
	cfg.Prefix = "test/" + rand.Text()[:12] + "/"
	t.Cleanup(func() {
		drivertest.DeleteAll(t, cfg.Prefix, func(ctx context.Context) (*Storage, error) { return OpenStorage(ctx, cfg) })
	})
	return cfg
}

// marshalConfig renders cfg as the YAML a user would write.
func marshalConfig(t testing.TB, cfg Config) []byte {
	t.Helper()
	return drivertest.Marshal(t, cfg)
}

// newStorage opens a Storage on cfg, closed when t ends.
func newStorage(t testing.TB, cfg Config) *Storage {
	t.Helper()
	st, err := OpenStorage(context.Background(), cfg)
	if err != nil {
		t.Fatalf("OpenStorage: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
