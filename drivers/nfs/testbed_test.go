package nfs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stratastream/strata/internal/testbed"
)

// testbedRoot is the directory `testbed/up nfs` made. Tests fail (never
// skip) when it cannot be had.
func testbedRoot(t testing.TB) string {
	t.Helper()
	env, err := testbed.Env("nfs", "STRATA_NFS_CONFIG")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(env["STRATA_NFS_CONFIG"])
	if err != nil {
		t.Fatalf("reading the nfs testbed config: %v", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("the nfs testbed config %s: %v", env["STRATA_NFS_CONFIG"], err)
	}
	return c.Root
}

// freshRoot makes a new, empty store directory under the testbed's root,
// removed when t ends.
func freshRoot(t testing.TB) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	dir, err := os.MkdirTemp(testbedRoot(t), name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// configFor is a driver config for root with extra YAML lines.
func configFor(root string, extra ...string) []byte {
	return []byte(fmt.Sprintf("root: %q\n%s", root, strings.Join(extra, "\n")))
}

// openStorage opens the Storage of a raw config.
func openStorage(ctx context.Context, config []byte) (*Storage, error) {
	c, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	return OpenStorage(ctx, c, nil)
}
