package nfs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stratastream/strata/drivers/internal/drivertest"
)

// testbedRoot is the directory `testbed/up nfs` made. Tests fail (never
// skip) when it cannot be had.
func testbedRoot(t testing.TB) string {
	t.Helper()
	return drivertest.TestbedConfig(t, "nfs", "STRATA_NFS_CONFIG", ParseConfig).Root
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
	return OpenStorage(ctx, c)
}

// alignedBytes is n bytes of a pattern (seeded by seed) starting at an
// address that is a multiple of align.
func alignedBytes(n, align, seed int) []byte {
	p := alignedZeros(n, align)
	for i := range p {
		p[i] = byte(i*7 + seed)
	}
	return p
}
