package hdfs

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream/plugin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	plugin.CleanupClients()
	if pluginDir != "" {
		os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// baseConfig is the driver config `testbed/up hdfs` wrote. It fails the
// test (never skips) when HDFS cannot be started.
func baseConfig(t testing.TB) Config {
	t.Helper()
	env, err := testbed.Env("hdfs", "STRATA_HDFS_CONFIG")
	if err != nil {
		t.Fatalf("hdfs testbed: %v", err)
	}
	data, err := os.ReadFile(env["STRATA_HDFS_CONFIG"])
	if err != nil {
		t.Fatalf("hdfs testbed config: %v", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("hdfs testbed config %s: %v", env["STRATA_HDFS_CONFIG"], err)
	}
	return cfg
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
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wipe removes cfg's root.
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

// pluginDir holds the plugin binary once built; TestMain removes it.
var pluginDir string

// pluginBinary builds strata-driver-hdfs once per test binary run.
var pluginBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "strata-driver-hdfs-")
	if err != nil {
		return "", err
	}
	pluginDir = dir
	bin := filepath.Join(dir, "strata-driver-hdfs")
	cmd := exec.Command("go", "build", "-o", bin, "./drivers/hdfs/cmd/strata-driver-hdfs")
	cmd.Dir = testbed.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	return bin, nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "go build strata-driver-hdfs: " + e.err.Error() + "\n" + e.out
}
