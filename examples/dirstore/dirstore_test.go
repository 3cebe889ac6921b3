package dirstore_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/conformance/storagetest"
	"github.com/stratastream/strata/examples/dirstore"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/chunked"
)

// configFor is the driver config of a store on root.
func configFor(root string) []byte { return fmt.Appendf(nil, "root: %q\n", root) }

// TestStorage runs the chunked.Storage suite: every method's edge cases,
// and put-if-absent raced by several OS processes (children of this test
// binary) on one directory.
func TestStorage(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		Open: func(ctx context.Context, config []byte) (chunked.Storage, error) {
			c, err := dirstore.ParseConfig(config)
			if err != nil {
				return nil, err
			}
			return dirstore.OpenStorage(ctx, c)
		},
		NewConfig: func(t *testing.T) []byte { return configFor(t.TempDir()) },
	})
}

// TestConformance runs the stream suite on the driver linked in: every
// store is opened on the same directory (each case has stream names of
// its own), a crash drops a store without Close, and the fault family
// moves the directory away and back (conformance.DirectoryCtl).
func TestConformance(t *testing.T) {
	root := t.TempDir()
	open := func(t conformance.T) *stream.Store {
		s, err := dirstore.Open(t.Context(), configFor(root))
		if err != nil {
			t.Fatalf("dirstore.Open: %v", err)
		}
		return s
	}
	conformance.Run(t, conformance.Harness{
		NewStore:   open,
		Second:     func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
		Crash:      func(t conformance.T, _ *stream.Store) *stream.Store { return open(t) },
		BackendCtl: conformance.DirectoryCtl(root),
	})
}

// TestConformanceOutOfProcess runs the stream suite on the plugin binary:
// every store is a driver process of its own, so Second races two
// processes on the directory, and Crash SIGKILLs one.
func TestConformanceOutOfProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "strata-driver-dirstore")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/strata-driver-dirstore").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	h, info, err := conformance.PluginHarness(t.Context(), bin, configFor(root))
	if err != nil {
		t.Fatal(err)
	}
	if !info.Durable || !info.SharedNamespace {
		t.Fatalf("Info %+v: want Durable and SharedNamespace", info)
	}
	h.BackendCtl = conformance.DirectoryCtl(root)
	conformance.Run(t, h)
}
