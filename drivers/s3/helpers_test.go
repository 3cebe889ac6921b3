package s3

import (
	"context"
	"crypto/rand"
	"os"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/internal/testbed"
)

// minioConfig returns the MinIO testbed's driver config with a prefix no
// other test uses, and removes every object under that prefix when t ends.
// It fails t (never skips) when MinIO cannot be started.
func minioConfig(t testing.TB) Config {
	t.Helper()
	env, err := testbed.Env("minio", "STRATA_S3_CONFIG")
	if err != nil {
		t.Fatalf("MinIO testbed: %v", err)
	}
	raw, err := os.ReadFile(env["STRATA_S3_CONFIG"])
	if err != nil {
		t.Fatalf("reading STRATA_S3_CONFIG: %v", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatalf("parsing %s: %v", env["STRATA_S3_CONFIG"], err)
	}
	cfg.Prefix = "test/" + rand.Text()[:12] + "/"
	t.Cleanup(func() { removePrefix(t, cfg) })
	return cfg
}

// removePrefix deletes every object under cfg.Prefix.
func removePrefix(t testing.TB, cfg Config) {
	ctx := context.Background()
	st, err := NewStorage(ctx, cfg)
	if err != nil {
		t.Logf("cleanup of %s: %v", cfg.Prefix, err)
		return
	}
	defer st.Close()
	keys, err := st.List(ctx, "", "", 0)
	if err == nil {
		err = st.Delete(ctx, keys)
	}
	if err != nil {
		t.Logf("cleanup of %s: %v", cfg.Prefix, err)
	}
}

// marshalConfig renders cfg as the YAML a user would write.
func marshalConfig(t testing.TB, cfg Config) []byte {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	return b
}

// newStorage opens a Storage on cfg, closed when t ends.
func newStorage(t testing.TB, cfg Config) *Storage {
	t.Helper()
	st, err := NewStorage(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewStorage: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
