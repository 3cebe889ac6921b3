package nfs

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

// backendCtl is the conformance fault hook for a store directory: it moves
// root away and back (testbed/ctl nfs --root ROOT stop|start).
func backendCtl(root string) string {
	return filepath.Join(testbed.RepoRoot(), "testbed", "ctl") + " nfs --root " + root
}

// TestConformanceInProcess runs the stream suite on the driver linked in,
// on a directory under the nfs testbed. Second stores live in another OS
// process (the plugin binary) on the same directory, so the multi-writer
// and read-only cases race two processes.
func TestConformanceInProcess(t *testing.T) {
	root := freshRoot(t)
	config := configFor(root)
	bin := driverBinary(t)
	open := func(t conformance.T) stream.Store {
		s, err := Open(t.Context(), config)
		if err != nil {
			t.Fatalf("nfs.Open on %s: %v", root, err)
		}
		return s
	}
	conformance.Run(t, conformance.Harness{
		NewStore: open,
		Second: func(t conformance.T, _ stream.Store) stream.Store {
			s, err := plugin.Open(t.Context(), bin, config)
			if err != nil {
				t.Fatalf("second store in a plugin process: %v", err)
			}
			return s
		},
		// In-process crash: the old Store is dropped without Close (its
		// goroutines go on as a stale writer) and a new one opens.
		Crash:      func(t conformance.T, _ stream.Store) stream.Store { return open(t) },
		BackendCtl: backendCtl(root),
	})
}

// TestConformanceOutOfProcess runs the stream suite through the plugin
// binary: every Store is its own driver process; Crash SIGKILLs it.
func TestConformanceOutOfProcess(t *testing.T) {
	root := freshRoot(t)
	config := configFor(root)
	bin := driverBinary(t)
	var mu sync.Mutex
	clients := map[stream.Store]*plugin.Client{}
	open := func(t conformance.T) stream.Store {
		c, err := plugin.Start(t.Context(), bin)
		if err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := c.OpenStore(t.Context(), config)
		if err != nil {
			t.Fatalf("OpenStore in pid %d on %s: %v", c.Pid(), root, err)
		}
		mu.Lock()
		clients[s] = c
		mu.Unlock()
		return s
	}
	conformance.Run(t, conformance.Harness{
		NewStore: open,
		Second:   func(t conformance.T, _ stream.Store) stream.Store { return open(t) },
		Crash: func(t conformance.T, s stream.Store) stream.Store {
			mu.Lock()
			c := clients[s]
			mu.Unlock()
			if c == nil {
				t.Fatalf("crash: store not opened by this harness")
			}
			if err := c.Kill(); err != nil {
				t.Fatalf("SIGKILL driver pid %d: %v", c.Pid(), err)
			}
			return open(t)
		},
		CrashKillsProcess: true,
		BackendCtl:        backendCtl(root),
	})
}
