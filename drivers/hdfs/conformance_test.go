package hdfs

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratastream/strata/conformance"
	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

// harness opens the stores of one conformance run on the HDFS testbed.
// Stores of the run share one fresh root (cases use names of their own
// under it). Second always starts another driver process, so two-writer
// cases race across OS processes in both modes.
type harness struct {
	config []byte
	mu     sync.Mutex
	procs  map[stream.Store]*plugin.Client
}

func newHarness(t *testing.T) *harness {
	if _, err := pluginBinary(); err != nil {
		t.Fatal(err)
	}
	return &harness{config: marshal(t, freshConfig(t)), procs: map[stream.Store]*plugin.Client{}}
}

// inProcess opens a Store in this process.
func (h *harness) inProcess(t conformance.T) stream.Store {
	t.Helper()
	s, err := Open(t.Context(), h.config)
	if err != nil {
		t.Fatalf("hdfs.Open: %v", err)
	}
	return s
}

// outOfProcess starts a driver process and opens a Store in it. The process
// is stopped when the case ends.
func (h *harness) outOfProcess(t conformance.T) stream.Store {
	t.Helper()
	bin, err := pluginBinary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx := context.Background()
	c, err := plugin.Start(ctx, bin, plugin.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("plugin.Start(%s): %v", bin, err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.OpenStore(ctx, h.config)
	if err != nil {
		t.Fatalf("OpenStore in driver process %d: %v", c.Pid(), err)
	}
	h.mu.Lock()
	h.procs[s] = c
	h.mu.Unlock()
	return s
}

// crashOutOfProcess SIGKILLs the driver process holding s and opens a
// Store in a new process.
func (h *harness) crashOutOfProcess(t conformance.T, s stream.Store) stream.Store {
	t.Helper()
	h.mu.Lock()
	c, ok := h.procs[s]
	delete(h.procs, s)
	h.mu.Unlock()
	if !ok {
		t.Fatalf("hdfs harness: store %p has no driver process", s)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("killing driver process %d: %v", c.Pid(), err)
	}
	return h.outOfProcess(t)
}

// backendCtl is the fault family's command to stop and start the whole
// cluster (NameNode and DataNode).
func backendCtl() string {
	return filepath.Join(testbed.RepoRoot(), "testbed", "ctl") + " hdfs"
}

// dataNodeCtl is the fault family's command to stop and start only the
// DataNode: "stop" and "start" become stop-datanode and start-datanode.
func dataNodeCtl() string {
	return "f() { " + backendCtl() + ` "$1-datanode"; }; f`
}

// TestConformanceInProcess: the stream suite on the driver linked in; the
// second writer of fencing cases is another OS process; a crash drops the
// Store without Close.
func TestConformanceInProcess(t *testing.T) {
	h := newHarness(t)
	conformance.Run(t, conformance.Harness{
		NewStore:   h.inProcess,
		Second:     func(t conformance.T, _ stream.Store) stream.Store { return h.outOfProcess(t) },
		Crash:      func(t conformance.T, _ stream.Store) stream.Store { return h.inProcess(t) },
		BackendCtl: backendCtl(),
	})
}

// TestConformanceOutOfProcess: the stream suite on the plugin binary; each
// store is its own driver process, and a crash is SIGKILL.
func TestConformanceOutOfProcess(t *testing.T) {
	h := newHarness(t)
	conformance.Run(t, conformance.Harness{
		NewStore:          h.outOfProcess,
		Second:            func(t conformance.T, _ stream.Store) stream.Store { return h.outOfProcess(t) },
		Crash:             h.crashOutOfProcess,
		CrashKillsProcess: true,
		BackendCtl:        backendCtl(),
	})
}

// TestFaultDataNodeOnly: the fault family again, with only the DataNode
// stopped (the NameNode stays up and answers): appends fail ErrUnavailable
// within the bound, and after the DataNode restarts every acked batch is
// there. A skipped case fails this test.
func TestFaultDataNodeOnly(t *testing.T) {
	h := newHarness(t)
	cases, err := conformance.Select(conformance.Cases(), "^fault/")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no fault cases: %v", err)
	}
	hh := conformance.Harness{
		NewStore:   h.inProcess,
		Second:     func(t conformance.T, _ stream.Store) stream.Store { return h.outOfProcess(t) },
		Crash:      func(t conformance.T, _ stream.Store) stream.Store { return h.inProcess(t) },
		BackendCtl: dataNodeCtl(),
	}
	for _, c := range cases {
		t.Run(c.FullName(), func(t *testing.T) {
			r := conformance.RunCase(t.Context(), hh, c, conformance.RunOptions{})
			for _, l := range r.Log {
				t.Log(l)
			}
			if r.Status != conformance.StatusPass {
				t.Fatalf("%s: %s: %s", c.FullName(), r.Status, r.Error)
			}
		})
	}
}
