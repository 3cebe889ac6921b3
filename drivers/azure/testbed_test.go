package azure

import (
	"context"
	"crypto/rand"
	"os"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/internal/testbed"
)

// baseConfig is the driver config `testbed/up azurite` wrote. It fails the
// test (never skips) when Azurite cannot be started.
func baseConfig(t testing.TB) Config {
	t.Helper()
	env, err := testbed.Env("azurite", "STRATA_AZURE_CONFIG")
	if err != nil {
		t.Fatalf("azurite testbed: %v", err)
	}
	data, err := os.ReadFile(env["STRATA_AZURE_CONFIG"])
	if err != nil {
		t.Fatalf("azurite testbed config: %v", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("azurite testbed config %s: %v", env["STRATA_AZURE_CONFIG"], err)
	}
	return cfg
}

// freshConfig returns the testbed config under a new prefix that no other
// test uses, and removes the prefix's blobs when t ends.
func freshConfig(t testing.TB) Config {
	t.Helper()
	cfg := baseConfig(t)
	cfg.Prefix = "test/" + rand.Text() + "/"
	t.Cleanup(func() { wipe(t, cfg) })
	return cfg
}

// marshal renders cfg as the YAML config Open takes.
func marshal(t testing.TB, cfg Config) []byte {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wipe deletes every blob under cfg's prefix.
func wipe(t testing.TB, cfg Config) {
	ctx := context.Background()
	st, err := NewStorage(ctx, cfg)
	if err != nil {
		t.Errorf("cleanup of %s: %v", cfg.Prefix, err)
		return
	}
	defer st.Close()
	keys, err := st.List(ctx, "", "", 0)
	if err == nil {
		err = st.Delete(ctx, keys)
	}
	if err != nil {
		t.Errorf("cleanup of %s: %v", cfg.Prefix, err)
	}
}
