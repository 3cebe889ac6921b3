package sharedlog_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/sharedlog/sharedlogtest"
	"github.com/stratastream/strata/stream"
)

// nfsConfig returns a driver config for a fresh directory under the nfs
// testbed's root (removed when t ends). It fails, never skips, when the
// testbed cannot start.
func nfsConfig(t testing.TB) []byte {
	t.Helper()
	testbed.SkipShort(t, "the nfs testbed (testbed/up nfs)")
	env, err := testbed.Env("nfs", "STRATA_NFS_CONFIG")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(env["STRATA_NFS_CONFIG"])
	if err != nil {
		t.Fatalf("reading the nfs testbed config: %v", err)
	}
	c, err := nfs.ParseConfig(data)
	if err != nil {
		t.Fatalf("the nfs testbed config: %v", err)
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(c.Root, "sharedlog-"+name[:min(len(name), 40)]+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return []byte(fmt.Sprintf("root: %q\n", dir))
}

// TestSharedLogNFS runs the SharedLog suite on the nfs driver (linked in)
// over the nfs testbed directory. Second stores and crashes open another
// Store on the same directory; the crashed one is dropped without Close.
func TestSharedLogNFS(t *testing.T) {
	config := nfsConfig(t)
	open := func(t conformance.T) *stream.Store {
		s, err := nfs.Open(t.Context(), config)
		if err != nil {
			t.Fatalf("nfs.Open: %v", err)
		}
		return s
	}
	sharedlogtest.Run(t, conformance.Harness{
		NewStore: open,
		Second:   func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
		Crash:    func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
	})
}
