package drivertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream/chunked"
)

// TestbedConfig returns the driver config that `testbed/up NAME` wrote
// (the file named by its envVar, such as STRATA_S3_CONFIG), parsed by
// parse. It skips t under -short (the fast tier starts no backend) and
// otherwise fails t (never skips) when the testbed cannot be started or its
// config does not parse.
func TestbedConfig[C any](t testing.TB, name, envVar string, parse func([]byte) (C, error)) C {
	t.Helper()
	testbed.SkipShort(t, "the "+name+" testbed (testbed/up "+name+")")
	env, err := testbed.Env(name, envVar)
	if err != nil {
		t.Fatalf("%s testbed: %v", name, err)
	}
	data, err := os.ReadFile(env[envVar])
	if err != nil {
		t.Fatalf("%s testbed config: %v", name, err)
	}
	c, err := parse(data)
	if err != nil {
		t.Fatalf("%s testbed config %s: %v", name, env[envVar], err)
	}
	return c
}

// BackendCtl is the conformance fault hook of a testbed: testbed/ctl with
// args (such as "minio"), to which the suite appends stop or start.
func BackendCtl(args ...string) string {
	return strings.Join(append([]string{filepath.Join(testbed.RepoRoot(), "testbed", "ctl")}, args...), " ")
}

// Marshal renders a driver config as the YAML document Open takes,
// failing t if it cannot.
func Marshal(t testing.TB, config any) []byte {
	t.Helper()
	b, err := yaml.Marshal(config)
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	return b
}

// DeleteAll deletes every object of the Storage that open opens (a test's
// prefix or root) and closes it; failures are test errors naming what.
// It is meant for t.Cleanup.
func DeleteAll[S chunked.Storage](t testing.TB, what string, open func(context.Context) (S, error)) {
	ctx := context.Background()
	st, err := open(ctx)
	if err != nil {
		t.Errorf("cleanup of %s: %v", what, err)
		return
	}
	defer st.Close()
	keys, err := st.List(ctx, "", "", 0)
	// In batches: one Delete call is bounded by the driver's operation
	// timeout, which thousands of objects on a busy machine can exceed.
	for len(keys) > 0 && err == nil {
		n := min(len(keys), 256)
		err = st.Delete(ctx, keys[:n])
		keys = keys[n:]
	}
	if err != nil {
		t.Errorf("cleanup of %s: %v", what, err)
	}
}

// Ctl runs testbed/ctl with args (such as "azurite", "stop"), failing t
// with its output when it fails. It skips t under -short, like
// TestbedConfig.
func Ctl(t testing.TB, args ...string) {
	t.Helper()
	testbed.SkipShort(t, "testbed/ctl "+strings.Join(args, " "))
	out, err := exec.Command(filepath.Join(testbed.RepoRoot(), "testbed", "ctl"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testbed/ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
